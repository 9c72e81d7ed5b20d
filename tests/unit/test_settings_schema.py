"""One settings schema: validation in one place, and the CLI's options generated from it."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from engine.cli.main import build_parser
from engine.cli.options import model_settings_from, run_settings_from
from engine.core.errors import SettingsError
from engine.core.setting_schema import options
from engine.core.settings import SESSION_ONLY_SETTINGS, ModelSettings, RunSettings

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "values, needle",
    [
        (dict(lookahead=0), "lookahead"),
        (dict(chunk_size=0), "chunk size"),
        (dict(keep=0.0), "keep must be in (0, 1]"),
        (dict(keep=1.5), "keep must be in (0, 1]"),
        (dict(keep=math.nan), "keep"),
        (dict(kernel=12), "odd"),
        (dict(kernel=0), "kernel"),
        (dict(positions="gap"), "positions must be one of"),
        (dict(max_new_tokens=0), "max new tokens"),
        (dict(draft_window=-1), "draft window"),
    ],
)
def test_run_settings_refuse_bad_values(values, needle):
    with pytest.raises(
        SettingsError, match=needle.replace("(", r"\(").replace(")", r"\)").replace("]", r"\]")
    ):
        RunSettings(**values)


@pytest.mark.parametrize(
    "values, needle",
    [
        (dict(n_threads=0), "threads"),
        (dict(n_ctx=16), "context size"),
        (dict(device="tpu"), "device"),
        (dict(draft_quant="int4"), "draft quant"),
    ],
)
def test_model_settings_refuse_bad_values(values, needle):
    with pytest.raises(SettingsError, match=needle):
        ModelSettings(**values)


def test_boundaries_that_are_allowed():
    RunSettings(keep=1.0, lookahead=1, chunk_size=1, kernel=1, draft_window=0, min_tokens=0)
    ModelSettings(n_threads=1, n_ctx=256, target_path="t.gguf")


def test_the_cli_defaults_are_the_schema_defaults():
    args = build_parser().parse_args(["run", "--doc", "d.txt", "--question", "q"])
    assert run_settings_from(args) == RunSettings()
    assert model_settings_from(args) == ModelSettings()


def _help_of(verb: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", verb, "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout


@pytest.mark.slow
def test_every_schema_field_with_a_flag_is_on_the_cli():
    run_help, chat_help = _help_of("run"), _help_of("chat")
    for cls in (RunSettings, ModelSettings):
        for name, option, _ in options(cls):
            if option.flag != "":
                flag = option.flag or "--" + name.replace("_", "-")
                if name in SESSION_ONLY_SETTINGS:  # chat has them; one-shot runs do not
                    assert flag in chat_help and flag not in run_help, name
                else:
                    assert flag in run_help, name


@pytest.mark.slow
def test_a_setting_on_by_default_can_be_turned_off_from_the_cli():
    assert RunSettings().background_prefill is True
    assert "--no-background-prefill" in _help_of("chat")


@pytest.mark.slow
def test_cli_values_are_checked_by_the_schema_before_anything_loads():
    # The document does not exist: a bad chunk size must be reported first, before any reading or loading.
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "engine.cli",
            "run",
            "--doc",
            "no-such.pdf",
            "--question",
            "q",
            "--chunk-size",
            "0",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "chunk size" in lines[0] and "no-such.pdf" not in lines[0]


CTRL_C_DURING_LOAD = textwrap.dedent("""
    import sys, time
    import engine.pipeline.engine as pipeline

    def slow_load(*args, **kwargs):  # loading the real models is long library calls without cancel checks
        print("LOADING", file=sys.stderr, flush=True)
        time.sleep(60)

    pipeline.Engine.load = slow_load
    from engine.cli.main import main
    sys.exit(main(["run", "--doc", sys.argv[1], "--question", "q"]))
""")


@pytest.mark.slow
def test_ctrl_c_while_the_models_load_stops_the_cli(tmp_path):
    doc = tmp_path / "doc.txt"
    doc.write_text("A short document.")
    proc = subprocess.Popen(
        [sys.executable, "-c", CTRL_C_DURING_LOAD, str(doc)],
        cwd=ROOT,
        text=True,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
    )
    try:
        assert proc.stderr.readline().strip() == "LOADING"
        started = time.monotonic()
        proc.send_signal(subprocess.signal.SIGINT)
        code = proc.wait(timeout=20)
        assert code == 130 and time.monotonic() - started < 20
        assert proc.stderr.read().strip().splitlines()[-1] == "specprefill: cancelled"
    finally:
        proc.kill()
