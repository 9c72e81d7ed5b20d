"""The conversations' documents: one DocumentSession per document and system prompt, matched by
content, so every turn about one document (whoever sends it) finds the same session and its
cached prefixes. The most recently used are kept."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

from engine.api import DocumentSession

SESSIONS_KEPT = 8  # documents whose sessions (and so their cached prefixes' records) are kept


def content_key(document: str, system_prompt: str) -> str:
    """A document's key by content. Any string hashes, a lone surrogate too (JSON allows "\\ud800")."""
    text = f"{system_prompt}\0{document}".encode("utf-8", "surrogatepass")
    return hashlib.sha256(text).hexdigest()


class SessionStore:
    def __init__(self, kept: int = SESSIONS_KEPT) -> None:
        self.kept = kept
        self._lock = threading.Lock()
        self._sessions: OrderedDict[str, DocumentSession] = OrderedDict()

    def session_for(self, document: str, system_prompt: str) -> DocumentSession:
        """The session of this document and system prompt: the same one for every turn about it."""
        key = content_key(document, system_prompt)
        with self._lock:
            session = self._sessions.pop(key, None) or DocumentSession(document)
            self._sessions[key] = session
            while len(self._sessions) > self.kept:
                self._sessions.popitem(last=False)
            return session

    def __len__(self) -> int:
        return len(self._sessions)
