"""The open document: ingestion on a worker, and its token count once an engine is ready."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QObject, Signal

from desktop.sessions.engine_host import EngineHost
from desktop.sessions.worker import Worker, WorkerContext, make_pool
from engine.api import Document

log = logging.getLogger(__name__)

# load_document(path, *, password=None, cancel=None, progress=None) -> Document
DocumentLoader = Callable[..., Document]


@dataclass(frozen=True)
class IngestProgress:
    done: int
    total: int
    label: str


class OpenDocument(QObject):
    """The window's open document (the engine's DocumentSession is another thing: a document's caches)."""

    loadStarted = Signal(str)
    progress = Signal(int, int, str)
    loaded = Signal(object)  # Document
    failed = Signal(str, object, bool)  # path, the exception, whether this load was given a password
    cancelled = Signal(str)  # path
    tokensCounted = Signal(object, int)  # Document, tokens
    tokenCountFailed = Signal(object)  # the exception

    def __init__(self, loader: DocumentLoader, host: EngineHost, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._loader = loader
        self._host = host
        self._pool = make_pool(1)  # reading files needs no engine: its own thread, never behind a run
        self._document: Document | None = None
        self._tokens: int | None = None
        self._ingest: Worker | None = None
        self._counter: Worker | None = None

    @property
    def document(self) -> Document | None:
        return self._document

    @property
    def tokens(self) -> int | None:
        """The document's token count, once counted by the current engine."""
        return self._tokens

    @property
    def is_loading(self) -> bool:
        return self._ingest is not None and self._ingest.active

    def load(self, path: str, password: str | None = None) -> Worker:
        self.cancel()
        worker = Worker(lambda ctx: self._ingest_job(ctx, path, password), name=f"loading {path}")
        worker.event.connect(self._on_progress)
        worker.finished.connect(lambda doc: self._on_loaded(worker, doc))
        worker.failed.connect(lambda error: self.failed.emit(path, error, password is not None))
        worker.cancelled.connect(lambda: self.cancelled.emit(path))
        self._ingest = worker.start(self._pool)
        self.loadStarted.emit(path)  # after start: listeners see is_loading
        return worker

    def cancel(self) -> None:
        if self.is_loading:
            self._ingest.cancel()

    def shutdown(self, wait_ms: int = 2000) -> None:
        """Stop a load and let the reading thread finish before the app goes away."""
        self.cancel()
        self._pool.waitForDone(wait_ms)

    def count_tokens(self) -> None:
        """Count the document's tokens on the engine's thread (tokenizing is model work)."""
        document = self._document
        if document is None or not self._host.is_ready:
            return
        if self._counter is not None and self._counter.active:
            self._counter.cancel()
        self._tokens = None
        worker = self._host.submit("token count", lambda engine, ctx: engine.count_tokens(document.text))
        worker.finished.connect(lambda n: self._on_counted(worker, document, n))
        worker.failed.connect(self.tokenCountFailed)
        self._counter = worker

    def _ingest_job(self, ctx: WorkerContext, path: str, password: str | None) -> Document:
        def progress(done: int, total: int, label: str) -> None:
            ctx.emit(IngestProgress(done, total, label))

        return self._loader(path, password=password, cancel=ctx.cancel, progress=progress)

    def _on_progress(self, item: object) -> None:
        if isinstance(item, IngestProgress):
            self.progress.emit(item.done, item.total, item.label)

    def _on_loaded(self, worker: Worker, document: Document) -> None:
        if worker is not self._ingest:  # a newer load superseded this one
            return
        self._document = document
        self._tokens = None
        log.info(
            "loaded %s: %d segments, %d chars", document.path, len(document.segments), len(document.text)
        )
        self.loaded.emit(document)
        self.count_tokens()

    def _on_counted(self, worker: Worker, document: Document, tokens: int) -> None:
        if worker is self._counter and document is self._document:
            self._tokens = int(tokens)
            self.tokensCounted.emit(document, self._tokens)
