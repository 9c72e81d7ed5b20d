"""GUI test fixtures: a FakeEngine with the real engine's API, a fake document loader, a window.

The fake yields the same event types, in the same order, as engine.pipeline.Engine.stream,
with short sleeps that poll the cancel token, so runs take a fraction of a second and
Cancel lands within a few milliseconds at any stage. Its estimate and bypass rule follow
Engine's: a set threshold wins, else its calibration (a linear CostModel) when it has one,
else DEFAULT_MIN_TOKENS. A prompt longer than its window (FakeConfig.n_ctx, the real WindowFit's
arithmetic) is never bypassed: SpecPrefill fits it by selection, and a compare's full prefill is
cut to fit, as Engine does.
"""

from __future__ import annotations

import os

os.environ["QT_QPA_PLATFORM"] = "offscreen"

import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
from PySide6.QtCore import QSettings, QTimer

from desktop.window.main_window import MainWindow
from engine.core.cancel import CancelToken
from engine.core.errors import ContextOverflowError, IngestError, PasswordError, SpecPrefillError
from engine.core.events import (
    Notice,
    Progress,
    RunFinished,
    RunResult,
    Selection,
    SelectionMade,
    StageChanged,
    TokenGenerated,
    run_order,
)
from engine.core.settings import DEFAULT_MIN_TOKENS, ModelSettings, RunSettings
from engine.ingest.document import Document, Segment
from engine.pipeline.costmodel import CostModel, Quadratic
from engine.pipeline.fitting import WindowFit, seen_fraction
from tests.gui.fake_sessions import FakeSessions, for_run

CHARS_PER_TOKEN = 4
SYSTEM_PROMPT = "You are a helpful assistant. Answer using only the document.\n\n"
BASELINE_ANSWER = "The document explains how the parser handles errors and retries failed requests."
SPEC_ANSWER = "The document explains how the parser handles errors and retries requests."
FULL_ANSWER_KEEP = 0.2  # below this keep the fake's SpecPrefill answer loses words, as a real one might
# 1 ms per token of target prefill, 0.2 ms per token of draft scoring: easy figures to check.
FAKE_CALIBRATION = CostModel(target_prefill=Quadratic(0.0, 1e-3, 0.0), draft=Quadratic(0.0, 2e-4, 0.0))


# --- the fake engine ---------------------------------------------------------------------


@dataclass
class FakeConfig:
    """Timings and behaviours of the fake; tests change them before the window starts a job."""

    load_steps: int = 3
    load_step_s: float = 0.01
    stage_s: float = 0.01
    draft_steps: int = 6
    draft_step_s: float = 0.01
    prefill_steps: int = 4
    prefill_step_s: float = 0.01
    baseline_prefill_step_s: float | None = None  # a slower full prefill than SpecPrefill's, when set
    token_s: float = 0.004
    baseline_ttft_s: float = 4.0
    spec_ttft_s: float = 1.0
    positions_supported: bool = True
    load_error: str | None = None
    load_error_type: type[SpecPrefillError] = SpecPrefillError  # e.g. DefaultModelsError
    fail_stage: str | None = None  # raise fail_error_type when this stage starts
    fail_error_type: type[SpecPrefillError] = SpecPrefillError  # e.g. ContextOverflowError
    crash_stage: str | None = None  # raise a plain RuntimeError (a bug) when this stage starts
    notice: str | None = None  # a run-less Notice yielded at the start of each stream
    calibration: CostModel | None = None  # the engine's cost_model; None: not calibrated
    n_ctx: int = 32768  # the target's window: a smaller one makes long_pdf longer than it

    def make_fast(self) -> None:
        """No waits at all: an A/B suite of many runs finishes in a blink."""
        self.stage_s = self.draft_step_s = self.prefill_step_s = self.token_s = 0.0


def ticking_timer(ticks: list[float], interval_ms: int = 10) -> QTimer:
    """A started timer that appends the time at each tick: a gap between ticks is a blocked event loop."""
    timer = QTimer()
    timer.setInterval(interval_ms)
    timer.timeout.connect(lambda: ticks.append(time.monotonic()))
    timer.start()
    return timer


@dataclass
class FakeInfo:
    target_name: str = "FakeTarget-1.5B"
    draft_name: str = "FakeDraft-0.5B"
    target_path: str = "/models/fake-target.gguf"
    draft_path: str = "/models/fake-draft.gguf"
    positions_supported: bool = True
    device: str = "cpu"
    target_device: str = "CPU"
    target_offload_reason: str = "llama.cpp build has no GPU offload"
    flash_attn: str = "off"
    draft_memory_bytes: int = 300 * 1024 * 1024
    n_ctx: int = 32768
    draft_trained_window: int = 32768


def wait(seconds: float, cancel: CancelToken) -> None:
    """Sleep in small steps so Cancel is honoured within milliseconds, as the real engine must."""
    end = time.monotonic() + seconds
    while True:
        cancel.raise_if_cancelled()
        left = end - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(left, 0.002))


class FakeEngine(
    FakeSessions
):  # the session API (ask, ask_both, background_prefill, forget): fake_sessions.py
    def __init__(self, settings: ModelSettings, config: FakeConfig) -> None:
        self.settings = settings
        self.config = config
        self.info = FakeInfo(positions_supported=config.positions_supported, n_ctx=config.n_ctx)
        self.cost_model = config.calibration
        self.requests: list[dict] = []
        self.closed = False
        self.current_stage: str | None = None

    @classmethod
    def load(
        cls,
        model_settings: ModelSettings,
        progress=None,
        cancel: CancelToken | None = None,
        *,
        config: FakeConfig | None = None,
    ) -> FakeEngine:
        config = config or FakeConfig()
        cancel = cancel or CancelToken()
        for step in range(config.load_steps):
            if progress:
                progress(step, config.load_steps, f"verifying fake models ({step + 1}/{config.load_steps})")
            wait(config.load_step_s, cancel)
        if config.load_error:
            raise config.load_error_type(config.load_error)
        if progress:
            progress(config.load_steps, config.load_steps, "ready")
        return cls(model_settings, config)

    def count_tokens(self, text: str) -> int:
        return len(text) // CHARS_PER_TOKEN

    def close(self) -> None:
        self.closed = True

    def estimate(self, n_tokens: int, settings) -> dict | None:
        if self.cost_model is None:
            return None
        return self.cost_model.estimate(
            n_tokens, settings.keep, settings.draft_window, self.window_fit(n_tokens, settings).budget
        )

    def window_fit(
        self, n_tokens: int, settings: RunSettings, document_tokens: int | None = None
    ) -> WindowFit:
        doc = n_tokens if document_tokens is None else document_tokens
        return WindowFit(n_tokens, doc, self.info.n_ctx, settings.max_new_tokens)

    def bypass_reason(self, n_tokens: int, settings: RunSettings) -> str:
        if settings.force or not self.window_fit(n_tokens, settings).fits:
            return ""
        if settings.min_tokens is None and self.cost_model is not None:
            pays_off = self.cost_model.pays_off(n_tokens, settings.keep, settings.draft_window)
            return "" if pays_off else f"no gain predicted at {n_tokens} tokens"
        threshold = DEFAULT_MIN_TOKENS if settings.min_tokens is None else settings.min_tokens
        return (
            ""
            if n_tokens >= threshold
            else f"{n_tokens} tokens is below the SpecPrefill threshold of {threshold}"
        )

    def stream(
        self,
        document: Document,
        question: str,
        mode: str,
        settings: RunSettings,
        cancel: CancelToken,
        spec_first: bool = False,
    ):
        self.requests.append(
            {
                "mode": mode,
                "question": question,
                "settings": settings,
                "document": document,
                "spec_first": spec_first,
            }
        )
        if self.config.notice:
            yield Notice(None, self.config.notice)
        prompt, doc_span = build_prompt(document.text, question)
        runs = run_order(mode, spec_first)
        for run in runs:
            yield from self._run(run, prompt, doc_span, for_run(run, settings, len(runs) > 1), cancel)

    # --- one run ---------------------------------------------------------------------------

    def _stage(self, run: str, stage: str, cancel: CancelToken, detail: str = "") -> StageChanged:
        cancel.raise_if_cancelled()
        self.current_stage = stage
        if stage == self.config.fail_stage:
            raise self.config.fail_error_type(f"fake failure during {stage}")
        if stage == self.config.crash_stage:
            raise RuntimeError(f"fake crash during {stage}")
        return StageChanged(run, stage, detail)

    def _run(
        self, run: str, prompt: str, doc_span: tuple[int, int], settings: RunSettings, cancel: CancelToken
    ):
        cfg = self.config
        n_tokens = len(prompt) // CHARS_PER_TOKEN
        window = self.window_fit(n_tokens, settings, (doc_span[1] - doc_span[0]) // CHARS_PER_TOKEN)
        yield self._stage(run, "tokenizing", cancel)
        wait(cfg.stage_s, cancel)
        reason = self.bypass_reason(n_tokens, settings) if run == "spec" else ""
        bypassed = bool(reason)
        fit = self._fit_fields(run, window, settings)
        prefill_tokens, kept_fraction = n_tokens - fit["truncated_tokens"], 1.0
        if bypassed:
            yield Notice("spec", f"bypassed: {reason}")
        elif run == "spec":
            yield self._stage(run, "draft", cancel)
            for step in range(1, cfg.draft_steps + 1):
                wait(cfg.draft_step_s, cancel)
                yield Progress(run, "draft", n_tokens * step // cfg.draft_steps, n_tokens)
            yield self._stage(run, "select", cancel)
            selection = make_selection(
                prompt, doc_span, replace(settings, keep=window.spec_keep(settings.keep))
            )
            yield SelectionMade(run, selection)
            kept_tokens = sum(chunk_length(selection, i) for i in selection.kept_chunks)
            prefill_tokens, kept_fraction = kept_tokens, kept_tokens / n_tokens
            if not window.fits:
                fit["seen_fraction"] = seen_fraction(
                    window.document_tokens, min(kept_tokens, window.document_tokens)
                )
        yield self._stage(run, "prefill", cancel)
        step_s = (
            cfg.baseline_prefill_step_s
            if run == "baseline" and cfg.baseline_prefill_step_s
            else cfg.prefill_step_s
        )
        for step in range(1, cfg.prefill_steps + 1):
            wait(step_s, cancel)
            yield Progress(run, "prefill", prefill_tokens * step // cfg.prefill_steps, prefill_tokens)
        yield self._stage(run, "generating", cancel)
        answer = BASELINE_ANSWER if run == "baseline" or bypassed else spec_answer(settings.keep)
        words = answer.split(" ")
        for index, word in enumerate(words):
            wait(cfg.token_s, cancel)
            yield TokenGenerated(run, word if index == 0 else " " + word, index)
        yield self._stage(run, "done", cancel)
        positions = "contiguous"
        if run == "spec" and not bypassed:
            auto = (
                "restore" if window.fits and cfg.positions_supported else "renumber"
            )  # Engine.resolve_positions
            positions = auto if settings.positions == "auto" else settings.positions
        ttft = cfg.baseline_ttft_s if run == "baseline" or bypassed else cfg.spec_ttft_s
        yield RunFinished(
            run,
            RunResult(
                run=run,
                answer=answer,
                prompt_tokens=n_tokens - fit["truncated_tokens"],
                prefill_tokens=prefill_tokens,
                ttft_s=ttft,
                decode_tok_s=42.0,
                generated_tokens=len(words),
                tokenize_s=0.01,
                target_prefill_s=ttft * 0.9,
                draft_s=0.3 if run == "spec" else 0.0,
                kept_fraction=kept_fraction,
                positions=positions,
                bypassed=bypassed,
                bypass_reason=reason,
                stop_reason="eos",
                document_tokens=window.document_tokens,
                **fit,
            ),
        )

    @staticmethod
    def _fit_fields(run: str, window: WindowFit, settings: RunSettings) -> dict:
        """How a run fits a too-long prompt, as Engine labels it: SpecPrefill by its selection (the
        share seen follows the selection), the full prefill cut to fit or refused."""
        if window.fits:
            return dict(fit="fits", seen_fraction=1.0, truncated_tokens=0)
        if run == "spec":
            return dict(fit="selected", seen_fraction=1.0, truncated_tokens=0)
        if not settings.truncate:
            raise ContextOverflowError(
                f"{window.prompt_tokens} tokens do not fit the {window.n_ctx}-token window"
            )
        cut = window.prompt_tokens - window.budget
        return dict(
            fit="truncated",
            seen_fraction=seen_fraction(window.document_tokens, window.document_tokens - cut),
            truncated_tokens=cut,
        )


def spec_answer(keep: float) -> str:
    """SPEC_ANSWER from FULL_ANSWER_KEEP up; cut short in proportion below it."""
    words = SPEC_ANSWER.split(" ")
    kept = len(words) if keep >= FULL_ANSWER_KEEP else max(3, round(len(words) * keep / FULL_ANSWER_KEEP))
    return " ".join(words[:kept])


def build_prompt(doc_text: str, question: str) -> tuple[str, tuple[int, int]]:
    start = len(SYSTEM_PROMPT)
    prompt = SYSTEM_PROMPT + doc_text + "\n\nQuestion: " + question
    return prompt, (start, start + len(doc_text))


def chunk_score(i: int) -> float:
    """Deterministic, uneven scores: a fixed pseudo-random walk over chunk indices."""
    return ((i * 7919) % 101) / 100.0


def make_selection(prompt: str, doc_span: tuple[int, int], settings: RunSettings) -> Selection:
    offsets = list(range(0, len(prompt) - CHARS_PER_TOKEN + 1, CHARS_PER_TOKEN))
    size = settings.chunk_size
    starts = list(range(0, len(offsets), size))
    scores = [chunk_score(i) for i in range(len(starts))]
    protected = sorted({0, len(starts) - 1})
    budget = max(int(len(starts) * settings.keep), len(protected))
    ranked = sorted((i for i in range(len(starts)) if i not in protected), key=lambda i: -scores[i])
    kept = sorted(set(protected) | set(ranked[: budget - len(protected)]))
    return Selection(
        chunk_size=size,
        chunk_starts=starts,
        chunk_scores=scores,
        kept_chunks=kept,
        protected_chunks=protected,
        token_char_offsets=offsets,
        doc_char_span=doc_span,
    )


def chunk_length(selection: Selection, i: int) -> int:
    end = (
        selection.chunk_starts[i + 1]
        if i + 1 < len(selection.chunk_starts)
        else len(selection.token_char_offsets)
    )
    return end - selection.chunk_starts[i]


# --- the fake document loader ------------------------------------------------------------------


def fake_load_document(path, *, password=None, cancel=None, progress=None) -> Document:
    """Pages split on form feeds (a .pdf is a text file here), folders become one segment per file.

    A file starting with "ENCRYPTED:<password>\\n" needs that password, like an encrypted PDF.
    """
    p = Path(path)
    if not p.exists():
        raise IngestError(f"no such file or folder: {p}")
    if p.is_dir():
        return _load_folder(p, cancel, progress)
    text = p.read_text(encoding="utf-8")
    if text.startswith("ENCRYPTED:"):
        secret, _, text = text[len("ENCRYPTED:") :].partition("\n")
        if password is None:
            raise PasswordError(f"{p} is encrypted; a password is needed to open it")
        if password != secret:
            raise PasswordError(f"{p} is encrypted and the password is wrong")
    pages = text.split("\f")
    kind = "pdf" if p.suffix == ".pdf" else "text"
    segments, parts, pos = [], [], 0
    for number, page in enumerate(pages, 1):
        if cancel:
            cancel.raise_if_cancelled()
        if progress:
            progress(number, len(pages), f"page {number}")
        label = f"page {number}" if kind == "pdf" else p.name
        segments.append(Segment(label, "page" if kind == "pdf" else "text", pos, pos + len(page)))
        parts.append(page)
        pos += len(page) + 1
    warnings = ["page 2 has no text layer"] if kind == "pdf" and any(not pg.strip() for pg in pages) else []
    return Document(p, kind, "\n".join(parts), segments, warnings)


def _load_folder(root: Path, cancel, progress) -> Document:
    files = sorted(f for f in root.rglob("*") if f.is_file())
    segments, parts, pos = [], [], 0
    for number, f in enumerate(files, 1):
        if cancel:
            cancel.raise_if_cancelled()
        if progress:
            progress(number, len(files), str(f.relative_to(root)))
        body = f.read_text(encoding="utf-8")
        segments.append(Segment(str(f.relative_to(root)), "file", pos, pos + len(body)))
        parts.append(body)
        pos += len(body) + 1
    return Document(root, "folder", "\n".join(parts), segments, [])


# --- fixtures -----------------------------------------------------------------------------


@dataclass
class EngineFactory:
    """The factory the window gets; remembers every engine it built."""

    config: FakeConfig
    built: list[FakeEngine] = field(default_factory=list)
    settings_seen: list[ModelSettings] = field(default_factory=list)

    def __call__(self, settings: ModelSettings, progress, cancel) -> FakeEngine:
        self.settings_seen.append(settings)
        engine = FakeEngine.load(settings, progress=progress, cancel=cancel, config=self.config)
        self.built.append(engine)
        return engine

    @property
    def engine(self) -> FakeEngine:
        return self.built[-1]


def page_text(number: int, n_chars: int) -> str:
    sentence = f"Page {number} talks about topic {number}: the parser retries failed requests. "
    return (sentence * (n_chars // len(sentence) + 1))[:n_chars]


@pytest.fixture
def qsettings(tmp_path) -> QSettings:
    return QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)


@pytest.fixture
def fake_config() -> FakeConfig:
    return FakeConfig()


@pytest.fixture
def engine_factory(fake_config) -> EngineFactory:
    return EngineFactory(fake_config)


@pytest.fixture
def long_pdf(tmp_path) -> Path:
    """Three "pages" of 8,000 chars: about 6,000 tokens, above the 4,096 threshold."""
    path = tmp_path / "report.pdf"
    path.write_text("\f".join(page_text(n, 8000) for n in (1, 2, 3)), encoding="utf-8")
    return path


@pytest.fixture
def short_txt(tmp_path) -> Path:
    path = tmp_path / "note.txt"
    path.write_text(page_text(1, 2000), encoding="utf-8")
    return path


@pytest.fixture
def code_folder(tmp_path) -> Path:
    root = tmp_path / "project"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "parser.py").write_text("def parse(text):\n    return text.split()\n" * 200)
    (root / "pkg" / "retry.py").write_text("def retry(fn, times=3):\n    return fn()\n" * 200)
    (root / "README.md").write_text("# Project\nA parser with retries.\n" * 100)
    return root


@pytest.fixture
def make_window(qtbot, qsettings, engine_factory):
    """Build a started window; by default wait until its (fake) models are loaded."""

    def build(*, wait_ready: bool = True, ask_password=None, loader=fake_load_document, assemble_models=None):
        kwargs = {"ask_password": ask_password} if ask_password else {}
        if assemble_models is not None:
            kwargs["assemble_models"] = assemble_models
        window = MainWindow(engine_factory, loader=loader, settings=qsettings, **kwargs)
        qtbot.addWidget(window)
        window.resize(1400, 900)
        window.show()
        window.start()
        if wait_ready:
            qtbot.waitUntil(lambda: window.host.is_ready, timeout=3000)
        return window

    return build


@pytest.fixture
def window(make_window):
    return make_window()


def open_and_ask(window, qtbot, path: Path, question: str):
    """Open `path`, wait until its tokens are counted, type `question`: the window is ready to run."""
    window.open_path(str(path))
    qtbot.waitUntil(lambda: window.documents.tokens is not None, timeout=3000)
    window.question.set_question(question)
    return window


@pytest.fixture
def loaded_window(window, qtbot, long_pdf):
    """A window with the long PDF loaded and its tokens counted, ready to run."""
    return open_and_ask(window, qtbot, long_pdf, "Summarize this document")


def wait_run_done(qtbot, window, timeout: int = 5000) -> None:
    qtbot.waitUntil(lambda: not window.runs.is_active, timeout=timeout)
