"""keep=auto (engine.draft.keep_policy) and coverage of pages and files (engine.draft.selection,
engine.pipeline.selection_plan): pure functions by hand, then the tiny engine end to end."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from engine.cli.options import OneLineParser, add_run_options, run_settings_from
from engine.core.errors import SettingsError
from engine.core.events import RunFinished, RunResult, SelectionMade
from engine.core.settings import (
    AUTO_KEEP_BROAD,
    AUTO_KEEP_CEILING,
    AUTO_KEEP_FLOOR,
    AUTO_KEEP_JOINED,
    AUTO_LONG_LOOKUP_TOKENS,
    RunSettings,
    nominal_keep,
)
from engine.draft.keep_policy import choose_keep, is_broad_question, is_joined_question, score_spread
from engine.draft.selection import chunk_parts, coverage_picks, select_chunks
from engine.eval.ab import AbError, parse_keeps
from engine.eval.labels import selection_note
from engine.ingest.document import Document, Segment
from engine.llama.prompt import PreparedPrompt, PromptParts
from engine.pipeline.selection_plan import plan_request_selection, segment_token_parts
from tests.fixtures.kept_parts import kept_segment_labels

FLOOR, CEILING = AUTO_KEEP_FLOOR, AUTO_KEEP_CEILING


def choose(scores: np.ndarray, question: str, prompt_tokens: int = 0):
    return choose_keep(
        scores,
        [0],
        question,
        FLOOR,
        CEILING,
        broad_keep=AUTO_KEEP_BROAD,
        joined_keep=AUTO_KEEP_JOINED,
        prompt_tokens=prompt_tokens,
        long_tokens=AUTO_LONG_LOOKUP_TOKENS,
    )


def peaked(n: int = 200, peak: slice = slice(50, 53)) -> np.ndarray:
    scores = np.full(n, 1.0) + np.linspace(0, 0.001, n)  # nearly flat, no ties
    scores[peak] += 5.0
    return scores


# -- the keep from the scores ---------------------------------------------------------------------


def test_one_standout_region_is_concentrated_and_keeps_the_floor():
    choice = choose(peaked(), "Which signal requests a checkpoint?")
    assert choice.spread == pytest.approx(3 / 199, abs=0.01)  # 3 of the 199 free chunks hold the mass
    assert (choice.keep, choice.reason, choice.broad) == (FLOOR, "the relevant text is concentrated", False)


def test_scores_spread_evenly_keep_the_ceiling():
    scores = np.tile([1.0, 2.0], 100)  # half the chunks stand out equally: the mass is spread
    choice = choose(scores, "Which value?")
    assert choice.spread > 0.35 and choice.keep == CEILING
    assert choice.reason == "the relevant text is spread out"


def test_a_flat_row_counts_as_fully_spread_and_protected_chunks_are_ignored():
    scores = np.ones(50)
    assert score_spread(scores, [0]) == 1.0
    scores[0] = 100.0  # the always-kept first chunk's attention sink must not look like concentration
    assert score_spread(scores, [0]) == 1.0


@given(st.lists(st.floats(0, 1, allow_nan=False), min_size=2, max_size=300))
@hsettings(max_examples=200, deadline=None)
def test_the_keep_stays_between_floor_and_ceiling(values):
    choice = choose(np.array(values), "What is it?")
    assert FLOOR <= choice.keep <= CEILING and 0.0 < choice.spread <= 1.0


@pytest.mark.parametrize(
    "question, broad",
    [
        ("Summarize in two or three sentences what this guide covers.", True),
        ("Give an overview of the package.", True),
        ("How many options does the guide list for mpiexec?", True),
        ("List all the functions in the module.", True),
        ("How many divisions to an inch does the XFig grid have?", False),  # a number looked up in one place
        ("What is the default value of the chunksize parameter?", False),
    ],
)
def test_broad_questions_are_told_from_look_ups(question, broad):
    assert is_broad_question(question) is broad


def test_a_broad_question_gets_the_broad_keep_whatever_its_scores():
    for scores in (peaked(), np.tile([1.0, 2.0], 100)):  # concentrated, then spread out
        choice = choose(scores, "Summarize what this document covers.")
        assert choice.keep == AUTO_KEEP_BROAD and choice.broad and "broad" in choice.reason
    assert choose(peaked(), "Which value?").keep == FLOOR  # the same scores, a look-up: the floor


@pytest.mark.parametrize(
    "question, joined",
    [
        ("mpfi_init gives a variable the default precision. What is that default precision, in bits?", True),
        ("Which environment variable controls the same setting as the -ckpoint-interval option?", True),
        ("A footnote cites a paper by T. Hickey. In which journal was that paper published?", True),
        ("The layout's schematic is an earlier figure; what file name is printed on that drawing?", True),
        ("Which file; the one named in the heading?", False),  # a clause, but no question word after it
        ("Which signal requests a checkpoint?", False),
        (
            "What does Cache.__setitem__ raise when the value is too large?",
            False,
        ),  # a dotted name is no sentence
        ("Which class evicts at random? A) FIFOCache B) RRCache Answer with the option's text.", False),
        ("Summarize this guide. What are its main parts?", False),  # broad first: a summary is not a join
    ],
)
def test_questions_that_join_two_facts_are_told_apart(question, joined):
    assert is_joined_question(question) is joined


def test_a_joined_question_gets_the_joined_keep_whatever_its_scores():
    for scores in (peaked(), np.tile([1.0, 2.0], 100)):
        choice = choose(
            scores, "Instance folders came in one Flask version. Which TRAP_ value came in the same one?"
        )
        assert (choice.keep, choice.reason, choice.broad) == (
            AUTO_KEEP_JOINED,
            "the question joins two facts",
            False,
        )


def test_a_look_up_in_a_long_prompt_keeps_the_floor_however_spread_its_scores():
    spread = np.tile([1.0, 2.0], 100)
    assert (
        choose(spread, "Which value?", AUTO_LONG_LOOKUP_TOKENS - 1).keep == CEILING
    )  # short: from the spread
    choice = choose(spread, "Which value?", AUTO_LONG_LOOKUP_TOKENS)
    assert (choice.keep, choice.reason, choice.broad) == (FLOOR, "a look-up in a long document", False)
    assert choice.spread > 0.35  # still measured, for the report


def test_in_a_long_prompt_a_broad_or_joined_question_keeps_its_own_keep():
    long = 2 * AUTO_LONG_LOOKUP_TOKENS
    assert choose(peaked(), "Summarize what this document covers.", long).keep == AUTO_KEEP_BROAD
    assert choose(peaked(), "A footnote cites T. Hickey. Which journal?", long).keep == AUTO_KEEP_JOINED


def test_past_the_window_a_long_look_up_keeps_the_spreads_keep():
    n_tokens = AUTO_LONG_LOOKUP_TOKENS + 400
    parts = PromptParts(prefix="", document="x" * (n_tokens - 4), gap="", question="Which value?", tail="")
    prompt = PreparedPrompt(parts, np.arange(n_tokens, dtype=np.int32), (0, n_tokens - 4))
    importance = np.tile([1.0, 1.0, 2.0, 2.0], n_tokens // 4)  # chunks of 2 alike in pairs: spread out
    settings = RunSettings(keep="auto", chunk_size=2, question_words=0)

    def plan(budget):
        return plan_request_selection(importance, prompt, settings, budget, [], list(range(n_tokens)))

    assert (plan(None).keep, plan(None).keep_reason) == (FLOOR, "a look-up in a long document")  # fits
    assert (plan(n_tokens // 2).keep, plan(n_tokens // 2).keep_reason) == (
        CEILING,
        "the relevant text is spread out",
    )


# -- coverage ------------------------------------------------------------------------------------------


def test_coverage_gives_every_part_its_best_chunks_round_robin():
    scores = np.array([9, 8, 7, 1, 2, 3, 0.5, 0.4, 0.3, 0.2], dtype=float)
    parts = [(0, 3), (3, 6), (6, 10)]
    # share 0.5: quotas 2, 2, 2; best first in every part, then the second best
    assert coverage_picks(scores, parts, 0.5) == [0, 5, 6, 1, 4, 7]


def test_select_chunks_with_parts_reaches_a_part_plain_top_k_skips():
    scores = np.array([5, 9, 8, 7, 6, 1, 1.5, 1.2], dtype=float)
    plain = select_chunks(scores, 0.5, [0])
    covered = select_chunks(scores, 0.5, [0], parts=[(0, 5), (5, 8)])
    assert plain == [0, 1, 2, 3] and len(covered) == len(plain)
    assert 6 in covered and covered == [0, 1, 2, 6]  # the second part's best, then the top scores


def test_a_budget_smaller_than_the_parts_still_reaches_the_first_parts_best():
    scores = np.arange(20, dtype=float)
    parts = [(i, i + 2) for i in range(0, 20, 2)]  # ten parts, budget of four chunks
    assert select_chunks(scores, 0.2, [0], parts=parts) == [0, 1, 3, 5]


def test_token_parts_become_the_chunks_that_hold_them():
    assert chunk_parts([(0, 40), (40, 100), (100, 100)], 32) == [(0, 2), (1, 4)]


def test_segments_map_to_token_ranges_inside_the_document():
    # The document starts at prompt char 10; tokens start every 5 chars.
    offsets = list(range(0, 200, 5))
    segments = [Segment("page 1", "page", 0, 50), Segment("page 2", "page", 50, 120)]
    assert segment_token_parts(segments, offsets, 10, (2, 30)) == [(2, 12), (12, 26)]


# -- settings, CLI, A/B keeps, JSON ---------------------------------------------------------------------


def test_keep_takes_auto_or_a_number_and_predictions_assume_the_nominal_keep():
    assert (
        RunSettings(keep="auto").keep == "auto" and nominal_keep("auto") == 0.2 and nominal_keep(0.3) == 0.3
    )
    with pytest.raises(SettingsError, match=r"keep must be a number in \(0, 1\] or auto, got 'half'"):
        RunSettings(keep="half")


def test_the_cli_accepts_keep_auto_and_refuses_other_words(capsys):
    parser = OneLineParser(prog="specprefill run")
    add_run_options(parser)
    assert run_settings_from(parser.parse_args(["--keep", "auto"])).keep == "auto"
    assert run_settings_from(parser.parse_args(["--keep", "0.3"])).keep == 0.3
    with pytest.raises(SystemExit) as exit_info:
        parser.parse_args(["--keep", "most"])
    assert exit_info.value.code == 2 and "expected a number or auto, got 'most'" in capsys.readouterr().err


def test_ab_keeps_take_auto_beside_fixed_ones():
    assert parse_keeps("0.1,0.2,auto") == ["0.1", "0.2", "auto"]
    with pytest.raises(AbError, match="or auto, got 'most'"):
        parse_keeps("0.1,most")


def test_keep_reason_and_coverage_appear_in_the_json_only_when_used():
    plain = RunResult(
        run="spec",
        answer="a",
        prompt_tokens=10,
        prefill_tokens=2,
        ttft_s=1,
        decode_tok_s=1,
        generated_tokens=1,
        tokenize_s=0,
        target_prefill_s=1,
        kept_fraction=0.2,
    )
    assert "keep_reason" not in plain.to_json() and "covered_parts" not in plain.to_json()
    auto = RunResult(
        **{**plain.__dict__, "keep_reason": "the relevant text is concentrated", "covered_parts": 3}
    )
    assert auto.to_json()["keep_reason"] == "the relevant text is concentrated"
    assert (
        selection_note(auto)
        == "keep auto chose 20%: the relevant text is concentrated; every one of 3 parts covered"
    )
    assert selection_note(plain) == ""


# -- the tiny engine end to end ---------------------------------------------------------------------------

PAGES = [
    f"Page {i}: " + " ".join(f"item {i}-{j} is {['red', 'blue'][j % 2]}." for j in range(20))
    for i in range(6)
]


def paged_document() -> Document:
    text, segments, start = "", [], 0
    for i, page in enumerate(PAGES):
        segments.append(Segment(f"page {i + 1}", "page", start, start + len(page)))
        text += page + "\n"
        start = len(text)
    return Document(Path("paged.pdf"), "pdf", text, segments)


def spec_run(engine, question: str, **settings) -> tuple[RunResult, set[int]]:
    """The result, and the pages (0-based) some kept chunk starts in."""
    document = paged_document()
    events = list(
        engine.stream(
            document, question, "spec", RunSettings(max_new_tokens=2, force=True, chunk_size=8, **settings)
        )
    )
    (result,) = [e.result for e in events if isinstance(e, RunFinished)]
    (selection,) = [e.selection for e in events if isinstance(e, SelectionMade)]
    return result, {int(label.split()[1]) - 1 for label in kept_segment_labels(document, selection)}


def spec_result(engine, question: str, **settings) -> RunResult:
    return spec_run(engine, question, **settings)[0]


def test_auto_keep_runs_with_a_reason_and_a_keep_in_range(engine):
    result = spec_result(engine, "Which item is red?", keep="auto", coverage="off")
    assert result.keep_reason.startswith("the relevant text is")
    assert result.covered_parts == 0
    assert FLOOR * 0.9 <= result.kept_fraction <= CEILING + 0.15  # protected chunks come on top of the keep


def test_a_summary_covers_every_page(engine):
    result, pages = spec_run(engine, "Summarize what this document covers.", keep=0.1)
    assert result.covered_parts == len(PAGES) and result.keep_reason == ""
    assert pages == set(range(len(PAGES)))  # a kept chunk on every page
    fixed = spec_result(engine, "Summarize what this document covers.", keep=0.1, coverage="off")
    assert fixed.covered_parts == 0
    assert json.loads(json.dumps(result.to_json()))["covered_parts"] == len(PAGES)


def test_auto_keeps_the_broad_keep_for_a_summary_spread_over_every_page(engine):
    result, pages = spec_run(engine, "Summarize what this document covers.", keep="auto")
    assert "broad" in result.keep_reason and result.covered_parts == len(PAGES)
    assert pages == set(range(len(PAGES)))
    fixed = spec_result(engine, "Summarize what this document covers.", keep=AUTO_KEEP_BROAD)
    assert result.kept_fraction == fixed.kept_fraction  # the same selection as the fixed broad keep
