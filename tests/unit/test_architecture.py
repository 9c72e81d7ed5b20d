"""The architecture holds: import-linter's contracts, a clean import of the engine without Qt,
and a demonstration that a function moved to the wrong layer breaks the layers contract."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).with_name("lint-imports")
CONTRACTS = (
    "The engine is Qt-free",
    "The engine is layered",
    "The draft and the llama.cpp runtime never import each other",
    "The app uses the engine's public API only",
    "The CLI uses the engine's API",
    "The engine has no import cycles between its packages",
)


def lint(cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT), "--no-cache"], cwd=cwd, capture_output=True, text=True, env=env)


def test_import_linter_contracts_hold():
    proc = lint(ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in CONTRACTS:
        assert f"{name} KEPT" in proc.stdout


def test_a_core_module_that_imports_the_pipeline_breaks_the_layers(tmp_path):
    for part in ("engine", "desktop"):
        shutil.copytree(ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    settings = tmp_path / "engine" / "core" / "settings.py"
    settings.write_text(
        settings.read_text() + "\nfrom engine.pipeline.costmodel import attention_area  # wrong layer\n"
    )
    proc = lint(tmp_path, env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert proc.returncode != 0
    assert "The engine is layered BROKEN" in proc.stdout
    assert "engine.core.settings -> engine.pipeline.costmodel" in proc.stdout


def modules_loaded_by(imports: str, prefixes: tuple[str, ...]) -> list[str]:
    """The modules starting with `prefixes` that importing `imports` loads, in a clean interpreter."""
    code = f"import sys, {imports}; print(','.join(m for m in sys.modules if m.startswith({prefixes!r})))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return [m for m in proc.stdout.strip().split(",") if m]


@pytest.mark.slow
def test_importing_the_engine_loads_no_qt():
    assert (
        modules_loaded_by(
            "engine.pipeline, engine.cli.main, engine.ingest, engine.api", ("PySide6", "shiboken6", "desktop")
        )
        == []
    )


def test_the_public_api_imports_without_the_model_runtimes():
    """The app starts fast: engine.api loads torch and llama.cpp only when a model is loaded."""
    assert modules_loaded_by("engine.api", ("torch", "transformers", "llama_cpp")) == []
