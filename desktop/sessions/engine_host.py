"""Owns the engine: loads it on a worker and runs every engine job one at a time.

The engine holds native model state that is not thread-safe, so all engine jobs
(load, token counts, runs, A/B suites, calibration) share a single-thread pool: they queue instead
of overlapping, and a reload can never close a model a run is still using.

The background work (the draft's read-ahead, the full prefill: `start_background`) runs on a
second thread, the engine's BackgroundThread (desktop.sessions.background_lane), so a question
can start while it winds down: the engine pauses the fill by itself the moment a question
(`ask`, `ask_both`, `stream`) starts, so those jobs are submitted with `preempts_background`.
Every other job (a token count, a suite, calibration, a reload) cancels the fill and waits
until it has let go of the target.

The one exception is `predict`: it only does arithmetic on the engine's calibration
(no model, no native state), so it answers at once on the GUI thread.

`shutdown` frees the engine only once that thread has finished: a native call (tokenizing
a 30 MB text) cannot be interrupted, and freeing the models under it would be a use-after-free.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from PySide6.QtCore import QCoreApplication, QObject, Signal

from desktop.model.prediction import Prediction
from desktop.sessions.background_lane import BackgroundJob, BackgroundLane
from desktop.sessions.worker import Worker, WorkerContext, make_pool
from engine.api import BackgroundWork, Cancelled, CancelToken, ModelSettings, RunSettings, nominal_keep

log = logging.getLogger(__name__)

ProgressFn = Callable[[int, int, str], None]
POLL_MS = 50  # how often a closing host looks whether the engine thread has finished


class EngineLike(Protocol):
    """The part of engine.pipeline.Engine the GUI uses."""

    info: Any
    cost_model: Any  # this machine's calibration, or None

    def count_tokens(self, text: str) -> int: ...
    def estimate(self, n_tokens: int, settings: RunSettings) -> dict | None: ...
    def bypass_reason(self, n_tokens: int, settings: RunSettings) -> str: ...
    # the prompt against the target's window (engine WindowFit: fits, windows, keep_to_fit, spec_keep)
    def window_fit(self, n_tokens: int, settings: RunSettings) -> Any: ...
    def stream(self, *, document, question, mode, settings, cancel): ...
    # a document's session (engine.api.DocumentSession): follow-ups reuse its caches
    def ask(self, session, question, mode, settings, cancel): ...
    def ask_both(self, session, question, settings, cancel, spec_first=True): ...
    def background_needed(self, session, settings: RunSettings) -> bool: ...
    def background_prefill(self, session, settings: RunSettings, cancel: CancelToken): ...
    def read_ahead(self, session, settings: RunSettings, cancel: CancelToken): ...
    def forget(self, session, saved: bool = False) -> None: ...
    def close(self) -> None: ...
    # calibration (engine.api.calibrate_machine) times these
    def sample_tokens(self, text: str, n_tokens: int, what: str = "sample") -> list[int]: ...
    def time_prefill(self, tokens: list[int], cancel: CancelToken) -> float: ...
    def time_draft(self, tokens: list[int], settings: RunSettings | None, cancel: CancelToken) -> float: ...


# Builds a ready engine: factory(model_settings, progress, cancel). Tests inject a fake one.
EngineFactory = Callable[[ModelSettings, ProgressFn, CancelToken], EngineLike]
# Work a load does first, on the same thread: prepare(progress, cancel), e.g. assembling the models.
LoadPreparation = Callable[[ProgressFn, CancelToken], object]


@dataclass(frozen=True)
class JobProgress:
    """How far an engine job (a load, a calibration) has come; crosses from the engine thread as an event."""

    done: int
    total: int
    label: str


def progress_events(ctx: WorkerContext) -> ProgressFn:
    """A progress callback for engine code: each report reaches the GUI thread as a JobProgress event."""
    return lambda done, total, label: ctx.emit(JobProgress(done, total, label))


class EngineHost(QObject):
    loadStarted = Signal()
    loadProgress = Signal(int, int, str)
    ready = Signal(object)  # the engine's EngineInfo
    loadFailed = Signal(object)  # the exception (a DefaultModelsError means: offer to re-assemble)
    loadCancelled = Signal()

    def __init__(self, factory: EngineFactory, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._factory = factory
        self._pool = make_pool(1)
        self.background = BackgroundLane(self)  # the read-ahead and the fill: never in front of a question
        self._engine: EngineLike | None = None
        self._settings: ModelSettings | None = None  # the loaded engine's
        self._loader: Worker | None = None
        self._jobs: set[Worker] = set()  # submitted and not ended: Cancel reaches them at shutdown
        self._closing = False

    @property
    def engine(self) -> EngineLike | None:
        return self._engine

    @property
    def info(self) -> Any:
        return self._engine.info if self._engine is not None else None

    @property
    def settings(self) -> ModelSettings | None:
        """The settings the loaded engine was built from; None while none is loaded."""
        return self._settings if self._engine is not None else None

    @property
    def is_ready(self) -> bool:
        return self._engine is not None and not self._closing

    @property
    def is_loading(self) -> bool:
        return self._loader is not None and self._loader.active

    def load(self, settings: ModelSettings, prepare: LoadPreparation | None = None) -> Worker:
        """Replace the current engine with one built from `settings`, after `prepare` if given."""
        self.cancel_load()
        self.cancel_background()
        old, self._engine = self._engine, None
        worker = Worker(lambda ctx: self._load_job(ctx, old, settings, prepare), name="model loading")
        worker.event.connect(self._on_load_event)
        worker.finished.connect(lambda engine: self._on_loaded(worker, engine, settings))
        worker.failed.connect(self.loadFailed)
        worker.cancelled.connect(self.loadCancelled)
        self._loader = worker.start(self._pool)
        self.loadStarted.emit()  # after start: listeners see is_loading
        return worker

    def cancel_load(self) -> None:
        if self.is_loading:
            self._loader.cancel()

    def submit(
        self,
        name: str,
        job: Callable[[EngineLike, WorkerContext], object],
        *,
        preempts_background: bool = False,
    ) -> Worker:
        """Queue an engine job. The engine is bound now, so a later reload cannot swap it mid-job.

        `preempts_background`: the engine itself pauses the background fill when this job starts
        (a question), so it runs at once; any other job cancels the fill and waits for it."""
        engine = self._bound_engine()
        if not preempts_background:
            self.cancel_background()
            job = self._after_background(job)
        return self._start(Worker(lambda ctx: job(engine, ctx), name=name), self._pool)

    def start_background(self, name: str, work: Callable[[EngineLike], BackgroundWork]) -> BackgroundJob:
        """Start background work (engine.api.background_work) on its own thread, with the engine bound now;
        one at a time: a second start cancels the first. Its events come on `background`'s signals."""
        return self.background.start(name, work(self._bound_engine()))

    @property
    def is_background_active(self) -> bool:
        return self.background.active

    def cancel_background(self) -> None:
        self.background.cancel()

    def _bound_engine(self) -> EngineLike:
        if not self.is_ready:
            raise RuntimeError("no engine is loaded")
        return self._engine

    def _start(self, worker: Worker, pool) -> Worker:
        self._jobs.add(worker)
        worker.ended.connect(lambda: self._jobs.discard(worker))
        return worker.start(pool)

    def _after_background(self, job: Callable[[EngineLike, WorkerContext], object]):
        """`job`, run once the (cancelled) background fill has let go of the target."""

        def run(engine: EngineLike, ctx: WorkerContext) -> object:
            self.background.wait_idle()  # on the engine thread, never the GUI's
            return job(engine, ctx)

        return run

    def predict(self, n_tokens: int, settings: RunSettings) -> Prediction | None:
        """The prediction for a prompt of `n_tokens`, or None while no engine is loaded.

        Runs here, on the GUI thread, rather than queued behind a run that may take
        minutes: it reads only the calibration, so the keep slider updates it at once.
        """
        engine = self._engine
        if engine is None:
            return None
        return Prediction(
            engine.estimate(n_tokens, settings),
            engine.bypass_reason(n_tokens, settings),
            engine.window_fit(n_tokens, settings),
            nominal_keep(settings.keep),
        )

    def shutdown(self) -> None:
        """Cancel the load and every job, wait until the engine thread has finished, then free the engine.

        Waits as long as the running call takes (Cancel cannot stop a native call); the app's
        events keep flowing meanwhile, so nothing freezes.
        """
        self._closing = True
        self.cancel_load()
        for worker in list(self._jobs):
            worker.cancel()
        self.cancel_background()
        self._pool.clear()  # queued jobs never start
        self._wait_until_idle()
        if self._engine is not None:
            _close_quietly(self._engine)
            self._engine = None

    def _wait_until_idle(self) -> None:
        if not self._pool.waitForDone(0):
            log.info("waiting for the engine thread to finish before freeing the engine")
        while not self._pool.waitForDone(POLL_MS):
            QCoreApplication.processEvents()
        while not self.background.wait(POLL_MS / 1000):
            QCoreApplication.processEvents()
        QCoreApplication.processEvents()  # deliver how the last jobs ended, so their workers end too

    def _load_job(
        self,
        ctx: WorkerContext,
        old: EngineLike | None,
        settings: ModelSettings,
        prepare: LoadPreparation | None,
    ) -> EngineLike:
        if old is not None:
            self.background.wait_idle()  # the cancelled fill may still be in its last batch
            _close_quietly(old)
        progress = progress_events(ctx)
        if prepare is not None:
            prepare(progress, ctx.cancel)
        engine = self._factory(settings, progress, ctx.cancel)
        if ctx.cancel.cancelled:  # loaded anyway: free it, nobody will use it
            _close_quietly(engine)
            raise Cancelled()
        return engine

    def _on_load_event(self, item: object) -> None:
        if isinstance(item, JobProgress):
            self.loadProgress.emit(item.done, item.total, item.label)

    def _on_loaded(self, worker: Worker, engine: EngineLike, settings: ModelSettings) -> None:
        if self._closing:  # finished while the host shut down: nobody will use it, and no job runs
            _close_quietly(engine)
            return
        if worker is not self._loader:  # a superseded load finished before it saw its cancel
            Worker(lambda ctx: _close_quietly(engine), name="closing a stale engine").start(self._pool)
            return
        self._engine, self._settings = engine, settings
        log.info("engine ready: %s", engine.info)
        self.ready.emit(engine.info)


def _close_quietly(engine: EngineLike) -> None:
    try:
        engine.close()
    except Exception:  # closing must never take the app down
        log.exception("closing the engine failed")
