"""The engine stays Qt-free: checked by import-linter and by importing it in a clean interpreter."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_linter_contract_holds():
    lint = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "The engine is Qt-free KEPT" in proc.stdout


def test_importing_the_engine_loads_no_qt():
    code = ("import sys, engine.pipeline, engine.cli, engine.ingest; "
            "bad = [m for m in sys.modules if m.startswith(('PySide6', 'shiboken6', 'desktop'))]; "
            "print(bad); sys.exit(1 if bad else 0)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
