"""A run's progress in words and seconds: each stage's name, the positions mode's, the TTFT's
caption, and about how long a stage the cost model times has left. Qt-free: the run panes show it."""

from __future__ import annotations

from engine.api import SERVED_BY_LABELS, RunResult, format_duration

STAGE_TEXT = {
    "tokenizing": "Tokenizing",
    "draft": "Draft scoring",
    "select": "Selecting chunks",
    "prefill": "Prefill",
    "generating": "Generating",
    "done": "Done",
}
POSITION_TEXT = {
    "restore": "restore (original positions)",
    "renumber": "renumber (packed)",
    "compress": "compress (gaps shrunk to fit)",
    "contiguous": "contiguous",
}
TTFT_CAPTION = "time to first token"


def ttft_caption(result: RunResult) -> str:
    """ "time to first token · full prefill from the cache": how a session's answer was served."""
    served = SERVED_BY_LABELS.get(result.served_by, result.served_by)
    return f"{TTFT_CAPTION} · {served}" if served else TTFT_CAPTION


def eta_seconds(predicted_s: float | None, done: int, total: int) -> float | None:
    """Seconds left of a stage the cost model predicts `predicted_s` for, `done` of `total` tokens in;
    None without a prediction or a total.

    Progress counts tokens, so the prediction is shared out linearly over them: attention makes
    the last tokens a little dearer than the first, so it errs a little short near the end, but it
    needs no more than the estimate the document line already shows.
    """
    if predicted_s is None or total <= 0:
        return None
    left = 1.0 - min(max(done, 0), total) / total
    return max(predicted_s, 0.0) * left


def eta_text(seconds: float) -> str:
    return f"about {format_duration(seconds)} left"


def stage_predictions(run: str, estimate: dict | None, bypassed: bool = False) -> dict[str, float] | None:
    """The cost model's seconds for `run`'s long stages, by stage name; None when not calibrated.

    A bypassed SpecPrefill run is a full prefill, so it gets the full prefill's time.
    """
    if estimate is None:
        return None
    if run == "spec" and not bypassed:
        return {"draft": estimate["draft_s"], "prefill": estimate["target_prefill_s"]}
    return {"prefill": estimate["baseline_ttft_s"]}
