"""The server's counters in Prometheus' text format (GET /metrics): requests by route and status,
time to first token, the kept fraction of SpecPrefill runs, and how each answer's prefill was
served (a cache hit or not).

Requests are counted by route template ("/v1/models/{model}"), never by the path a client sent:
a path no route matches counts as UNMATCHED, so the number of series stays fixed whatever the
clients send. Label values are escaped as the exposition format asks."""

from __future__ import annotations

import threading
from collections import Counter

TTFT_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0)
KEPT_BUCKETS = (0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0)
CACHE_HITS = ("cached_full", "saved_state", "spec_cached_draft")
UNMATCHED = "unmatched"  # the route label of a request no route matched


def label_value(text: str) -> str:
    """A label's value in the text format: backslash, double quote and line feed escaped."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class Histogram:
    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.buckets = buckets
        self.counts = [0] * len(buckets)
        self.total = 0
        self.sum = 0.0

    def observe(self, value: float) -> None:
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[i] += 1
        self.total += 1
        self.sum += value

    def lines(self, name: str) -> list[str]:
        rows = [
            f'{name}_bucket{{le="{bound:g}"}} {n}' for bound, n in zip(self.buckets, self.counts, strict=True)
        ]
        return [
            *rows,
            f'{name}_bucket{{le="+Inf"}} {self.total}',
            f"{name}_sum {self.sum:.6f}",
            f"{name}_count {self.total}",
        ]


class Metrics:
    """Thread-safe: the routes count requests, the engine's worker records its answers."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: Counter[tuple[str, int]] = Counter()
        self.served_by: Counter[str] = Counter()
        self.ttft = Histogram(TTFT_BUCKETS)
        self.kept = Histogram(KEPT_BUCKETS)

    def count_request(self, route: str, status: int) -> None:
        with self._lock:
            self.requests[(route, status)] += 1

    def record_answer(self, ttft_s: float, served_by: str, kept_fraction: float | None) -> None:
        with self._lock:
            self.ttft.observe(ttft_s)
            self.served_by[served_by] += 1
            if kept_fraction is not None:
                self.kept.observe(kept_fraction)

    def render(self, queue_running: int, queue_waiting: int) -> str:
        with self._lock:
            lines = [
                "# HELP specprefill_requests_total HTTP requests answered, by route and status.",
                "# TYPE specprefill_requests_total counter",
            ]
            lines += [
                f'specprefill_requests_total{{route="{label_value(route)}",status="{status}"}} {n}'
                for (route, status), n in sorted(self.requests.items())
            ]
            lines += [
                "# HELP specprefill_ttft_seconds Time to first token of each answer.",
                "# TYPE specprefill_ttft_seconds histogram",
                *self.ttft.lines("specprefill_ttft_seconds"),
                "# HELP specprefill_kept_fraction Share of the prompt SpecPrefill kept (SpecPrefill runs).",
                "# TYPE specprefill_kept_fraction histogram",
                *self.kept.lines("specprefill_kept_fraction"),
                "# HELP specprefill_served_by_total Answers by how their prefill was served.",
                "# TYPE specprefill_served_by_total counter",
            ]
            lines += [
                f'specprefill_served_by_total{{served_by="{label_value(k)}"}} {n}'
                for k, n in sorted(self.served_by.items())
            ]
            hits = sum(self.served_by[k] for k in CACHE_HITS)
            lines += [
                "# HELP specprefill_cache_hits_total Answers served from a cached or saved prefix.",
                "# TYPE specprefill_cache_hits_total counter",
                f"specprefill_cache_hits_total {hits}",
                "# HELP specprefill_queue_requests Requests running and waiting for the engine.",
                "# TYPE specprefill_queue_requests gauge",
                f'specprefill_queue_requests{{state="running"}} {queue_running}',
                f'specprefill_queue_requests{{state="waiting"}} {queue_waiting}',
            ]
        return "\n".join(lines) + "\n"
