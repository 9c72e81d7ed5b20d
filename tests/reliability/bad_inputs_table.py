"""Run `specprefill run` on each bad input and print a markdown table: the input, what the user
sees, the exit code and the time. Run it by hand (pytest does not collect it):

    .venv/bin/python tests/reliability/bad_inputs_table.py [WORD ...]

With WORDs, only the rows whose label holds one of them (e.g. `Model Memory`).

Models are the tiny random GGUF pair of tests/fixtures (n_ctx 512), so every row takes
seconds; "what the user sees" is the CLI's own lines on stderr (errors, warnings, notices).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from engine.models import defaults as models  # noqa: E402
from tests.fixtures.folders import tree  # noqa: E402
from tests.fixtures.pdfs import encrypt_pdf, make_bomb_pdf, make_pdf, write_pdf  # noqa: E402
from tests.fixtures.tiny_gguf import write_tiny_gguf_other_vocab, write_tiny_pair, write_tiny_qwen2_gguf  # noqa: E402

QUESTION = "What is this about?"
PAGES = ["Alpha page one.", "Bravo page two.", "Charlie page three."]
DROP_DAC = ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]  # root, but bound by file modes


@dataclass
class Case:
    label: str
    make: Callable[[Path], list[str]]  # builds the input under the work dir; returns the CLI arguments
    models: bool = True  # pass the tiny models (False: the defaults, from the work dir's cache)
    prefix: list[str] = field(default_factory=list)  # a command to run the CLI under
    interrupt_after: str | None = None  # send Ctrl-C once a stderr line starts with this


@dataclass
class Row:
    label: str
    seen: str
    code: int
    seconds: float


# -- inputs ----------------------------------------------------------------------------------


def doc(path: Path, *extra: str) -> list[str]:
    return ["--doc", str(path), *extra]


def file_with(name: str, data: bytes, *extra: str) -> Callable[[Path], list[str]]:
    def make(work: Path) -> list[str]:
        (work / name).write_bytes(data)
        return doc(work / name, *extra)

    return make


def damaged_page(work: Path) -> list[str]:
    from tests.fixtures.pdfs import assemble_pdf, flate_stream_object, stream_object, text_operators

    streams = [stream_object(text_operators(t), compress=True) for t in PAGES]
    streams[1] = flate_stream_object(bytes(range(256)) * 2)
    (work / "damaged-page.pdf").write_bytes(assemble_pdf(streams))
    return doc(work / "damaged-page.pdf")


def cut_short(work: Path) -> list[str]:
    data = make_pdf(PAGES)
    (work / "cut.pdf").write_bytes(data[: data.index(b"8 0 obj")])
    return doc(work / "cut.pdf")


def encrypted(*extra: str) -> Callable[[Path], list[str]]:
    def make(work: Path) -> list[str]:
        path = work / "contract.pdf"
        if not path.exists():
            encrypt_pdf(make_pdf(PAGES), path, user="s3cret")
        return doc(path, *extra)

    return make


def gigantic(work: Path) -> list[str]:
    path = work / "huge.pdf"
    path.write_bytes(b"%PDF-1.7\n1 0 obj\n<< >>\nendobj\n")
    os.truncate(path, 3 << 30)  # sparse: 3 GB on paper, nothing on disk
    return doc(path)


def long_pdf(work: Path) -> list[str]:
    return doc(
        write_pdf(work / "manual.pdf", [f"Chapter {i}: part {i} explained." for i in range(1, 2501)]),
        "--truncate",
    )


def folder(name: str, files: dict, *extra: str) -> Callable[[Path], list[str]]:
    def make(work: Path) -> list[str]:
        root = work / name
        root.mkdir()
        tree(root, files)
        return doc(root, *extra)

    return make


def symlink_loop(work: Path) -> list[str]:
    root = tree(work / "loop", {"src/main.py": "print('hi')\n"})
    os.symlink(root, root / "src" / "again")
    return doc(root)


def crowded(work: Path) -> list[str]:
    root = work / "crowded"
    root.mkdir()
    for i in range(100_000):
        (root / f"f{i:06d}.txt").write_bytes(b"x\n")
    return doc(root, "--truncate")


def unreadable(work: Path) -> list[str]:
    path = work / "secret.txt"
    path.write_text("classified")
    path.chmod(0)
    return doc(path)


def long_text(*extra: str) -> Callable[[Path], list[str]]:
    return file_with("long.txt", ("All work and no play makes a dull model. " * 200).encode(), *extra)


def with_models(
    target: Callable[[Path], Path] | None = None,
    draft: Callable[[Path], Path] | None = None,
    n_ctx: int = 512,
) -> Callable[[Path], list[str]]:
    """A short document, with the tiny pair except where `target` or `draft` builds a replacement."""

    def make(work: Path) -> list[str]:
        (work / "note.txt").write_text("A short note about stones.")
        pair = work.parent / "models"  # written once for all cases
        return [
            *doc(work / "note.txt"),
            "--target",
            str(target(work) if target else pair / "tiny-target.gguf"),
            "--draft",
            str(draft(work) if draft else pair / "tiny-draft.gguf"),
            "--n-ctx",
            str(n_ctx),
        ]

    return make


def garbage_gguf(work: Path) -> Path:
    path = work / "corrupt.gguf"
    path.write_bytes(b"GGUF" + os.urandom(4096))
    return path


def tampered_defaults(work: Path) -> list[str]:
    for spec in models.DEFAULTS:
        spec.path.parent.mkdir(parents=True, exist_ok=True)
        spec.path.write_bytes(b"not the model")
    (work / "note.txt").write_text("A short note.")
    return doc(work / "note.txt")


def missing_defaults(work: Path) -> list[str]:
    shutil.rmtree(models.DRAFT.path.parent, ignore_errors=True)
    (work / "note.txt").write_text("A short note.")
    return doc(work / "note.txt")


CASES = [
    Case("PDF: a page with a corrupt stream", damaged_page),
    Case("PDF: cut short (truncated download)", cut_short),
    Case("PDF: random bytes named .pdf", file_with("junk.pdf", os.urandom(50_000))),
    Case("PDF: encrypted, no password", encrypted()),
    Case("PDF: encrypted, wrong password", encrypted("--password", "guess")),
    Case("PDF: encrypted, right password", encrypted("--password", "s3cret")),
    Case("PDF: scan without a text layer", file_with("scan.pdf", make_pdf([None, None]))),
    Case("PDF: bomb, one page inflating to 256 MB", file_with("bomb.pdf", make_bomb_pdf(256 << 20))),
    Case("PDF: nothing but a bomb", file_with("only-bomb.pdf", make_bomb_pdf(64 << 20, text_pages=0))),
    Case("PDF: 2,500 pages (with --truncate)", long_pdf),
    Case("PDF: 3 GB, damaged (sparse file)", gigantic),
    Case("Folder: empty", folder("empty", {})),
    Case(
        "Folder: only binaries",
        folder("bins", {"a.exe": b"MZ\x00", "b.so": b"\x7fELF\x00", "c.png": b"\x89PNG"}),
    ),
    Case("Folder: symlink loop", symlink_loop),
    Case("Folder: 100,000 files (with --truncate)", crowded),
    Case(
        "Folder: non-UTF-8 files",
        folder("enc", {"latin.txt": "caf\xe9\n".encode("latin-1"), "ok.py": "x = 1\n"}),
    ),
    Case(
        "Folder: a file over the size cap",
        folder("big", {"huge.log": b"x" * (600 << 10), "ok.py": "x = 1\n"}),
    ),
    Case("Path: missing", lambda work: doc(work / "nowhere" / "report.pdf")),
    Case("Path: no read permission (root without DAC override)", unreadable, prefix=DROP_DAC),
    Case("Prompt: longer than the context (512)", long_text()),
    Case("Prompt: longer than the context, --truncate", long_text("--truncate")),
    Case("Model: missing file", with_models(draft=lambda work: work / "missing.gguf")),
    Case("Model: corrupt GGUF", with_models(target=garbage_gguf)),
    Case("Model: defaults fail their sha256", tampered_defaults, models=False),
    Case("Model: defaults missing", missing_defaults, models=False),
    Case(
        "Model: draft with another vocabulary",
        with_models(draft=lambda work: write_tiny_gguf_other_vocab(work / "other-vocab.gguf")),
    ),
    Case(
        "Memory: a 1,000,000,000-token context",
        with_models(
            target=lambda work: write_tiny_qwen2_gguf(work / "roomy.gguf", seed=1, n_ctx=10**9), n_ctx=10**9
        ),
    ),
    Case("Cancel: Ctrl-C while the models load", with_models(), interrupt_after="[load] loading draft"),
]


# -- running ----------------------------------------------------------------------------------


def run_case(case: Case, work: Path, env: dict) -> Row:
    case_dir = work / f"case-{CASES.index(case):02d}"
    case_dir.mkdir()
    args = case.make(case_dir)
    if case.models and not any(a == "--target" for a in args):
        args += [
            "--target",
            str(work / "models" / "tiny-target.gguf"),
            "--draft",
            str(work / "models" / "tiny-draft.gguf"),
        ]
    command = [
        *case.prefix,
        sys.executable,
        "-m",
        "engine.cli",
        "run",
        "--question",
        QUESTION,
        "--mode",
        "baseline",
        "--max-new-tokens",
        "4",
        "--threads",
        "1",
        *args,
    ]
    started = time.monotonic()
    proc = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    lines = []
    for line in proc.stderr:
        lines.append(line.rstrip("\n"))
        if case.interrupt_after and line.startswith(case.interrupt_after):
            proc.send_signal(signal.SIGINT)
    code = proc.wait()
    return Row(case.label, what_the_user_sees(lines, work), code, time.monotonic() - started)


def what_the_user_sees(lines: list[str], work: Path) -> str:
    shown = [
        line
        for line in lines
        if line.startswith("specprefill:") or "cut to fit" in line or "Traceback" in line
    ]
    text = " / ".join(shown) or "(the answer; no warning)"
    return text.replace(str(work) + "/", "…/").replace("|", "\\|")


def print_table(rows: list[Row]) -> None:
    print("| Bad input | What the user sees (stderr) | Exit | Time |")
    print("|---|---|---|---|")
    for row in rows:
        print(f"| {row.label} | {row.seen} | {row.code} | {row.seconds:.1f} s |")


def main() -> int:
    shm = Path("/dev/shm")  # in memory where possible: some disks take minutes to delete 100,000 files
    work = Path(tempfile.mkdtemp(prefix="specprefill-bad-inputs-", dir=shm if shm.is_dir() else None))
    try:
        env = dict(
            os.environ, XDG_CACHE_HOME=str(work / "cache"), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1"
        )
        os.environ["XDG_CACHE_HOME"] = env["XDG_CACHE_HOME"]  # where the default-model cases put their files
        write_tiny_pair(work / "models")
        wanted = sys.argv[1:]
        rows = [
            run_case(case, work, env) for case in CASES if not wanted or any(w in case.label for w in wanted)
        ]
        print_table(rows)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
