"""TargetLocks: one request at a time, and a background fill that gives the target up to it."""

from __future__ import annotations

import pytest

from engine.core.cancel import CancelToken
from engine.core.errors import EngineBusyError
from engine.pipeline.locking import TargetLocks


def test_a_second_request_is_refused_while_one_runs():
    locks = TargetLocks()
    with locks.exclusive():
        assert locks.target.locked()
        with pytest.raises(EngineBusyError):
            with locks.exclusive():
                pass
    assert not locks.target.locked()
    with locks.exclusive():  # free again once the first has ended
        pass


def test_a_request_cancels_the_running_background_fill():
    locks = TargetLocks()
    with locks.background() as preempt:
        assert not preempt.cancelled
        with locks.exclusive():
            pass
        assert preempt.cancelled


def test_a_finished_background_fill_is_not_cancelled_by_a_later_request():
    locks = TargetLocks()
    with locks.background() as preempt:
        pass
    with locks.exclusive():
        pass
    assert not preempt.cancelled


def test_a_background_turn_runs_only_when_nothing_else_has_or_wants_the_target():
    locks = TargetLocks()
    with locks.background_turn(CancelToken()) as turn:
        assert turn and locks.target.locked()
    assert not locks.target.locked()  # each turn lets go of the target

    cancelled = CancelToken()
    cancelled.cancel()
    with locks.background_turn(cancelled) as turn:
        assert not turn

    with locks.exclusive():
        with locks.background_turn(CancelToken()) as turn:
            assert not turn
        assert locks.target.locked()  # a refused turn never releases the request's lock

    locks.closed = True
    with locks.background_turn(CancelToken()) as turn:
        assert not turn
    assert not locks.target.locked()
