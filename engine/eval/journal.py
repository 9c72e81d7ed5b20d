"""The A/B journal: every case written down as it finishes, so an interrupted suite loses nothing.

A JSONL file. The first line says what was run (the suite, its keeps, settings and whether
document caches were reused); each next line is one case record, in the report's own JSON.
Resuming reads back the cases that finished, if all of those are the same (a cold suite's
TTFTs never mix with cached ones); a case that failed is run again. Keeps may be added on resuming:
a finished case then runs only the keeps it lacks, beside its baseline and keeps from the journal.
A last line cut short by a kill is ignored, and a resumed journal is written anew without it.
One `ab` run writes a journal at a time (claim_journal): a second on the same suite would replace
the first's journal and append its cases to the other's, under a header that is not theirs.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from engine.core.atomic import write_text_atomic
from engine.core.errors import CacheError
from engine.core.locks import LockHeld, artefact_lock
from engine.core.paths import cache_dir
from engine.core.settings import RunSettings
from engine.eval.ab import AbError
from engine.eval.ab_environment import settings_record
from engine.eval.results import CaseRecord

log = logging.getLogger(__name__)

FORMAT = "specprefill-ab-journal/1"
SUFFIX = ".journal.jsonl"
JOURNAL_FOLDER = (
    "ab-journals"  # in the cache: the journals of runs without a report, and every journal's lock
)
# Settings added since journals were first written whose default acts otherwise than the code before
# them did: a journal without one ran as with this value, not the default.
AS_BEFORE_THEY_EXISTED = {"named_files": "off", "score_question": False, "question_words": 0.0}


@dataclass(frozen=True)
class JournalHeader:
    """What a journal's cases were run with: resuming needs the same."""

    suite: str  # the suite file, resolved
    keeps: tuple[str, ...]
    settings: dict  # engine.eval.ab_environment.settings_record: every setting but keep
    reuse_cache: bool = False  # `ab --reuse-cache`; journals written before it ran without

    def to_json(self) -> dict:
        return {
            "journal": FORMAT,
            "suite": self.suite,
            "keeps": list(self.keeps),
            "settings": dict(self.settings),
            "reuse_cache": self.reuse_cache,
        }

    @classmethod
    def from_json(cls, data: dict) -> JournalHeader:
        # A setting added since the journal was written is missing from it: its cases ran with its default,
        # or with the value that acts as the code before it did.
        settings = {**_jsonable(settings_record(RunSettings())), **AS_BEFORE_THEY_EXISTED, **data["settings"]}
        return cls(data["suite"], tuple(data["keeps"]), settings, data.get("reuse_cache", False))

    @classmethod
    def of(
        cls, suite: Path, keeps: Sequence[str], settings: dict, reuse_cache: bool = False
    ) -> JournalHeader:
        return cls(str(suite.resolve()), tuple(keeps), _jsonable(settings), reuse_cache)

    def differences(self, now: JournalHeader) -> list[str]:
        """What differs from `now`, as "name <this journal's value> (now <the value asked for>)".

        Keeps may be added, not dropped: the journal's cases then run only the keeps they lack."""
        pairs = [("suite", self.suite, now.suite)]
        if not set(self.keeps) <= set(now.keeps):
            pairs.append(("keeps", ",".join(self.keeps), ",".join(now.keeps)))
        pairs.append(("reuse_cache", self.reuse_cache, now.reuse_cache))
        pairs += [
            (name, self.settings.get(name), now.settings.get(name))
            for name in sorted(self.settings.keys() | now.settings.keys())
        ]
        return [f"{name} {made!r} (now {asked!r})" for name, made, asked in pairs if made != asked]


def _jsonable(settings: dict) -> dict:
    """Through JSON, so that it compares equal to settings read back from a file."""
    return json.loads(json.dumps(settings))


def default_journal_path(suite: Path, report: Path | None) -> Path:
    """Beside the report (ab.html -> ab.journal.jsonl); without one, in the cache, named after the suite."""
    if report is not None:
        return report.with_suffix(SUFFIX)
    digest = hashlib.sha256(str(suite.resolve()).encode()).hexdigest()[:10]
    return cache_dir() / JOURNAL_FOLDER / f"{suite.stem}-{digest}{SUFFIX}"


@contextmanager
def claim_journal(path: Path) -> Iterator[None]:
    """Hold the journal's lock for a whole run; raises AbError at once when another run holds it.

    The lock file is in the cache, never beside a report in the user's folder. A cache that cannot
    be written leaves the run unguarded, with a warning, rather than refusing it."""
    with ExitStack() as held:
        try:
            held.enter_context(artefact_lock(_journal_lock(path), wait=False))
        except LockHeld:
            raise AbError(
                f"another ab run is writing the journal {path}: wait for it to finish, or give this "
                "run a journal of its own (--report or --csv elsewhere)"
            ) from None
        except CacheError as error:
            log.warning("the journal %s is not locked against another ab run: %s", path, error)
        yield


def _journal_lock(path: Path) -> Path:
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    return cache_dir() / JOURNAL_FOLDER / f"{path.name}-{digest}"


def start_journal(path: Path, header: JournalHeader, records: Iterable[CaseRecord] = ()) -> None:
    """A new journal: its header and the cases carried over from a resumed one, replacing the file at once."""
    lines = [header.to_json(), *(record.to_json() for record in records)]
    write_text_atomic(path, "".join(_line(data) for data in lines))


def read_journal(path: Path, header: JournalHeader) -> dict[str, CaseRecord]:
    """The cases the journal holds as finished, by id (the last record of an id wins).

    Raises AbError when the journal was made for another suite, keeps `header` lacks or other settings.
    """
    made, finished = load_journal(path)
    differences = made.differences(header)
    if differences:
        raise AbError(
            f"cannot resume from {path}: it was made with {'; '.join(differences)}; "
            "run the same suite with the same keeps (or more) and settings (and --reuse-cache or not), "
            "or start over without resuming"
        )
    return finished


def load_journal(path: Path) -> tuple[JournalHeader, dict[str, CaseRecord]]:
    """What the journal was made with, and its finished cases by id (the last record of an id wins)."""
    lines = _read_lines(path)
    try:
        records = [CaseRecord.from_json(line) for line in lines[1:]]
    except (KeyError, TypeError) as e:
        raise AbError(f"{path}: a case record is damaged ({e}); start over without resuming") from None
    return JournalHeader.from_json(lines[0]), {record.id: record for record in records if not record.failed}


def append_case(path: Path, record: CaseRecord) -> None:
    """Add one case, on disk before the next case starts (a crash keeps it)."""
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(_line(record.to_json()))
        fh.flush()
        os.fsync(fh.fileno())


def _line(data: dict) -> str:
    return json.dumps(data, ensure_ascii=False) + "\n"


def _read_lines(path: Path) -> list[dict]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise AbError(f"cannot read the journal {path}: {e.strerror or e}") from e
    raw_lines = text.splitlines()
    lines: list[dict] = []
    for number, raw in enumerate(raw_lines, start=1):
        try:
            lines.append(json.loads(raw))
        except json.JSONDecodeError:
            if number == len(raw_lines) and not text.endswith("\n"):
                break  # the last line, cut short by a kill mid-write: that case runs again
            raise AbError(f"{path}:{number}: not a journal line") from None
    if not lines or lines[0].get("journal") != FORMAT:
        raise AbError(f"{path} is not an A/B journal")
    return lines
