"""The docs stay true: every flag documented, the reference generated, the site builds strict,
the README short, and no words about how the repository was worked on."""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cli.main import build_parser
from engine.cli.reference import render_markdown, undocumented, verbs
from engine.core.samples import sample_folder

REPO = Path(__file__).resolve().parents[2]
# Built from parts, so this file does not match its own pattern.
HISTORY_WORDS = re.compile(r"\b" + "st" + r"op\s+[0-9]+", re.IGNORECASE)
BINARY_SUFFIXES = {".png", ".pdf", ".gguf", ".ico", ".gz", ".zip", ".whl"}


def test_every_flag_and_verb_has_help():
    assert undocumented(build_parser()) == []


def test_a_flag_without_help_is_reported():
    parser = argparse.ArgumentParser(prog="demo")
    parser.add_argument("--loud", action="store_true")
    sub = parser.add_subparsers(dest="verb")
    quiet = sub.add_parser("quiet", help="says nothing")
    quiet.add_argument("--volume", type=int, help="how much")
    quiet.add_argument("--bare")
    sub.add_parser("mute")
    assert undocumented(parser) == ["--loud", "quiet --bare", "mute"]


def test_the_reference_names_every_verb_and_flag():
    parser = build_parser()
    page = render_markdown(parser)
    for verb, _, sub in verbs(parser):
        assert f"## `specprefill {verb}`" in page
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            for flag in action.option_strings:
                assert f"`{flag}`" in page, f"{verb} {flag} is missing from the reference"


def test_the_reference_shows_choices_and_help():
    page = render_markdown(build_parser())
    run_section = page.split("## `specprefill run`")[1].split("\n## ")[0]
    assert re.search(r"\| `--mode` \| .+ Choices: `baseline`, `spec`, `both`", run_section)


def test_readme_is_short_and_starts_with_the_essentials():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 220
    first_screen = "\n".join(lines[:45])
    assert "make run" in first_screen and "make test" in first_screen
    assert "## Results" in first_screen


def _tracked_text_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    paths = [REPO / name for name in out.decode("utf-8", "surrogateescape").split("\0") if name]
    return [p for p in paths if p.is_file() and p.suffix.lower() not in BINARY_SUFFIXES]


@pytest.mark.skipif(
    shutil.which("git") is None or not (REPO / ".git").exists(), reason="needs the git checkout"
)
def test_no_tracked_file_speaks_of_how_the_repository_was_worked_on():
    hits = []
    for path in _tracked_text_files():
        text = path.read_bytes().decode("utf-8", "replace")
        hits += [f"{path.relative_to(REPO)}: {m.group(0)!r}" for m in HISTORY_WORDS.finditer(text)]
    assert hits == []


def test_the_history_pattern_matches_across_a_line_break():
    assert HISTORY_WORDS.search("measured before " + "st" + "op\n38 scored")


def test_the_toolz_subset_is_an_unchanged_copy(tmp_path):
    """toolz-core is the part of toolz that fits one window (its README-SOURCE.md says why)."""
    core, toolz = (sample_folder(name, cache=tmp_path) for name in ("toolz-core", "toolz"))
    subset = [p for p in core.rglob("*") if p.is_file() and p.name != "README-SOURCE.md"]
    assert len(subset) >= 8
    for path in subset:
        original = toolz / path.relative_to(core)
        assert original.read_bytes() == path.read_bytes(), f"{path} differs from {original}"


@pytest.mark.slow
def test_the_docs_site_builds_strict(tmp_path):
    mkdocs = Path(sys.executable).with_name("mkdocs")
    if not mkdocs.exists():
        pytest.fail("mkdocs is not installed: `make setup` installs the test extras")
    site = tmp_path / "site"
    done = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(site)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    reference = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    assert "--keep" in reference and "specprefill needles" in reference
    assert "Unreleased" in (site / "changelog" / "index.html").read_text(encoding="utf-8")
