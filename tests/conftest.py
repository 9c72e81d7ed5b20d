import os

# No hub, ever: the engine must run from local files only.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# The draft runs in int8 in the tests whatever this CPU would measure (engine.draft.precision): a
# tiny fixture's formats time alike, and its answers must not hang on which won. The tests of the
# measurement, and the real-model tests of the drafts of another family, unset it.
os.environ.setdefault("SPECPREFILL_DRAFT_PRECISION", "int8")

import socket  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture
def free_port() -> int:
    """A loopback port nothing listens on (bound, read and released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
