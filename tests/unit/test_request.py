"""The request helpers: the question check, a compare's cut full prefill, and the shared result fields."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from engine.core.cancel import NEVER
from engine.core.settings import RunSettings
from engine.llama.context_fit import Truncation
from engine.pipeline.fitting import WindowFit
from engine.pipeline.request import Request, for_run, require_question


def test_an_empty_question_is_refused():
    with pytest.raises(ValueError, match="empty"):
        require_question("  \n")
    require_question("why?")


def test_only_a_compares_full_prefill_is_cut_to_fit():
    settings = RunSettings()
    assert for_run("baseline", settings, compare=True).truncate
    assert for_run("baseline", settings, compare=False) is settings
    assert for_run("spec", settings, compare=True) is settings


def request(cut: Truncation | None) -> Request:
    prompt = SimpleNamespace(n_tokens=900)
    return Request("baseline", prompt, cut, WindowFit(1000, 800, 512, 16), RunSettings(), NEVER, 0.0, 0.25)


def test_a_cut_full_prefill_says_how_much_of_the_document_it_saw():
    whole = request(None)
    assert whole.full_prefill_fields()["fit"] == "fits"
    assert whole.result_fields()["truncated_tokens"] == 0
    assert whole.result_fields()["document_tokens"] == 800

    cut = request(Truncation(800, 400, 4000, 2000))
    fields = cut.full_prefill_fields()
    assert fields["fit"] == "truncated" and fields["seen_fraction"] == pytest.approx(0.5)
    assert cut.result_fields()["truncated_tokens"] == 400
