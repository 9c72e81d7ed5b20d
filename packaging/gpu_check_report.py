"""gpu_check.sh's one result file: the card, each step's outcome and seconds, the device tests' counts,
the draft's GPU memory and the CUDA bench, gathered from what the steps wrote under OUT.

A step that did not run, or wrote nothing, is recorded as such instead of failing the report: the file
must say what a lent GPU machine did even when part of the check failed there.
Usage: python -P packaging/gpu_check_report.py OUT [--dry-run] (writes OUT/gpu-check.json)
"""

from __future__ import annotations

import argparse
import json
import sys
import xml.etree.ElementTree as ElementTree
from datetime import UTC, datetime
from pathlib import Path

REPORT = "gpu-check.json"


def card(out: Path) -> list[dict] | None:
    """Each GPU nvidia-smi listed (gpu.csv: name, memory.total, driver_version), or None without one."""
    path = out / "gpu.csv"
    if not path.is_file():
        return None
    cards = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        fields = [field.strip() for field in line.split(",")]
        if len(fields) == 3:
            cards.append({"name": fields[0], "memory_total": fields[1], "driver": fields[2]})
    return cards


def steps(out: Path) -> list[dict]:
    """steps.tsv's rows, one per step: name, time limit, exit status (or "dry"), seconds, command."""
    path = out / "steps.tsv"
    rows = []
    if path.is_file():
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            name, limit, rc, seconds, command = (line.split("\t", 4) + [""] * 5)[:5]
            rows.append(
                {
                    "name": name,
                    "limit_s": int(limit) if limit.isdigit() else limit,
                    "exit": int(rc) if rc.lstrip("-").isdigit() else rc,
                    "seconds": int(seconds) if seconds.isdigit() else None,
                    "command": command,
                }
            )
    return rows


def device_tests(out: Path) -> dict | None:
    """The device tests' counts from pytest's JUnit XML."""
    path = out / "device-tests.xml"
    if not path.is_file():
        return None
    try:
        root = ElementTree.parse(path).getroot()
    except ElementTree.ParseError as err:
        return {"error": f"unreadable JUnit XML: {err}"}
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    if suite is None:
        return {"error": "no testsuite in the JUnit XML"}
    return {key: int(suite.get(key, 0)) for key in ("tests", "failures", "errors", "skipped")}


def json_file(path: Path) -> object | None:
    """A step's JSON output, or a note on why there is none."""
    if not path.is_file() or path.stat().st_size == 0:
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        return {"error": f"not JSON ({err}); see {path.name}"}


def report(out: Path, dry_run: bool) -> dict:
    ran = steps(out)
    return {
        "what": "packaging/gpu_check.sh",
        "dry_run": dry_run,
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "gpus": card(out),
        "models": (out / "models.txt").read_text(encoding="utf-8").strip()
        if (out / "models.txt").is_file()
        else None,
        "passed": all(step["exit"] in (0, "dry") for step in ran) and bool(ran),
        "steps": ran,
        "device_tests": device_tests(out),
        "draft_memory": json_file(out / "draft-memory.json"),
        "bench": json_file(out / "bench-cuda.json"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the folder gpu_check.sh wrote into")
    parser.add_argument("--dry-run", action="store_true", help="the steps were only named, not run")
    args = parser.parse_args(argv)
    result = report(args.out, args.dry_run)
    (args.out / REPORT).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"gpu_check: {'dry run, ' if args.dry_run else ''}report in {args.out / REPORT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
