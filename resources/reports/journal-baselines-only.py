"""A copy of an A/B journal that holds only its baselines: no keeps in its header, no SpecPrefill
run in its cases (failed cases left out).

`specprefill ab --resume --keep K1,K2` on the copy then runs K1 and K2, one after the other in each
case, in one process, against the journal's baselines: a same-run TTFT comparison of two keeps
without paying the full prefills again (#14, stop 41).
Usage: python journal-baselines-only.py IN.journal.jsonl OUT.journal.jsonl"""
import dataclasses
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from engine.eval.journal import JournalHeader, load_journal, start_journal
from engine.eval.results import CaseRecord


def baselines_only(source: Path) -> tuple[JournalHeader, list[CaseRecord]]:
    """The source's header without keeps, and its last record per finished case without its keeps' runs."""
    header, finished = load_journal(source)
    return dataclasses.replace(header, keeps=()), [dataclasses.replace(r, spec={}) for r in finished.values()]


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    header, records = baselines_only(Path(sys.argv[1]))
    start_journal(Path(sys.argv[2]), header, records)
    print(f"{len(records)} cases, their baselines only, written to {sys.argv[2]}")
