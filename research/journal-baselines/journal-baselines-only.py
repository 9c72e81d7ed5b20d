"""A copy of an A/B journal that holds only its baselines: no keeps in its header, no SpecPrefill
run in its cases (failed cases left out).

`specprefill ab --resume --keep K1,K2` on the copy then runs K1 and K2, one after the other in each
case, in one process, against the journal's baselines: a same-run TTFT comparison of two keeps
without paying the full prefills again.
Usage: python research/journal-baselines/journal-baselines-only.py IN.journal.jsonl OUT.journal.jsonl"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from engine.eval.journal import JournalHeader, load_journal, start_journal
from engine.eval.results import CaseRecord


def baselines_only(source: Path) -> tuple[JournalHeader, list[CaseRecord]]:
    """The source's header without keeps, and its last record per finished case without its keeps' runs."""
    header, finished = load_journal(source)
    return dataclasses.replace(header, keeps=()), [dataclasses.replace(r, spec={}) for r in finished.values()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="an A/B journal (IN.journal.jsonl)")
    parser.add_argument("out", type=Path, help="the copy to write (OUT.journal.jsonl)")
    args = parser.parse_args(argv)
    header, records = baselines_only(args.source)
    start_journal(args.out, header, records)
    print(f"{len(records)} cases, their baselines only, written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
