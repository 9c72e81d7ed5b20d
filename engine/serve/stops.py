"""Stop sequences: the answer is cut before the first one that appears.

The scan is linear in the answer's length: each stop sequence keeps how many of its characters the
text seen so far ends with (a Knuth-Morris-Pratt automaton), so a new piece costs its own length
times the number of stops, however long the stops are. Text that may be the start of a stop is held
back until the next pieces show whether it is. It runs on the engine's worker thread, never on the
event loop.
"""

from __future__ import annotations


def failure_table(pattern: str) -> list[int]:
    """fail[i]: the length of the longest proper prefix of pattern[: i + 1] that is also its suffix."""
    fail, k = [0] * len(pattern), 0
    for i in range(1, len(pattern)):
        while k and pattern[i] != pattern[k]:
            k = fail[k - 1]
        if pattern[i] == pattern[k]:
            k += 1
        fail[i] = k
    return fail


class StopMatcher:
    """One stop sequence's automaton: feed it characters; it says when the sequence is complete."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.fail = failure_table(pattern)
        self.matched = 0  # characters of the pattern the text so far ends with

    def step(self, ch: str) -> bool:
        k, pattern = self.matched, self.pattern
        while k and pattern[k] != ch:
            k = self.fail[k - 1]
        if pattern[k] == ch:
            k += 1
        if k == len(pattern):
            self.matched = self.fail[k - 1]
            return True
        self.matched = k
        return False


class StopScanner:
    """Cuts the answer at the first stop sequence to complete, holding back a possible start of one."""

    def __init__(self, stops: tuple[str, ...]) -> None:
        self.matchers = [StopMatcher(s) for s in stops]
        self.pending = ""  # text not sent yet: a possible start of a stop sequence
        self.stopped = False

    def feed(self, piece: str) -> str:
        """The text that can be sent now ("" once stopped)."""
        if self.stopped:
            return ""
        if not self.matchers:
            return piece
        text = self.pending + piece
        for i, ch in enumerate(piece, start=len(self.pending)):
            # every automaton steps; of the stops that end here, the longest starts first
            ended = [len(m.pattern) for m in self.matchers if m.step(ch)]
            if ended:
                self.stopped, self.pending = True, ""
                return text[: i + 1 - max(ended)]
        hold = max(m.matched for m in self.matchers)
        out, self.pending = text[: len(text) - hold], text[len(text) - hold :]
        return out

    def flush(self) -> str:
        """What was held back, once the answer has ended without a stop."""
        out, self.pending = ("" if self.stopped else self.pending), ""
        return out
