"""The needle harness (engine.eval.needles) on the tiny pair: haystacks, placement, what each measure reports."""

from __future__ import annotations

import pytest

from engine.core.settings import RunSettings
from engine.eval.needles import (
    DEPTHS,
    NEEDLES,
    ask_needle,
    ask_needles_together,
    draft_keeps_needle,
    haystack,
    insert_needle,
    insert_needles,
    needle_for,
    needle_token_span,
)
from engine.pipeline.draft_cache import DraftCaches

TEXT = "\n".join(
    f"Line {i}: the {['amber', 'cobalt', 'jade'][i % 3]} lamp burns in room {i * 3}." for i in range(200)
)


def settings() -> RunSettings:
    return RunSettings(keep=0.2, chunk_size=16, max_new_tokens=8, min_tokens=0)


def test_each_depth_gets_its_own_fact_in_every_run():
    assert [needle_for(d) for d in DEPTHS] == list(NEEDLES)
    assert needle_for(88) is NEEDLES[4] and needle_for(12) is NEEDLES[0]
    assert len({n.answer for n in NEEDLES}) == len(NEEDLES)


def test_haystack_is_cut_to_the_length_asked(engine):
    text = haystack(engine, [TEXT[:3000], TEXT[3000:]], 700)
    assert abs(engine.count_tokens(text) - 700) <= 3  # re-tokenizing the cut text may merge a token or two
    with pytest.raises(ValueError, match="fewer than"):
        haystack(engine, ["tiny"], 700)


@pytest.mark.parametrize("depth", [0.1, 0.5, 0.9])
def test_the_fact_sits_on_its_own_line_near_its_depth(depth):
    doc = insert_needle(TEXT, depth, NEEDLES[1])
    at = doc.index(NEEDLES[1].fact)
    assert doc[at - 1] == "\n" and doc[at + len(NEEDLES[1].fact)] == "\n"
    assert abs(at / len(doc) - depth) < 0.05


def test_the_facts_tokens_are_found_in_the_prompt(engine):
    doc = insert_needle(TEXT, 0.5, NEEDLES[0])
    prompt = engine.prepare(doc, NEEDLES[0].question, settings())
    a, b = needle_token_span(engine, prompt, NEEDLES[0])
    assert NEEDLES[0].fact.strip(".") in engine.detokenize(prompt.tokens[a:b].tolist())


@pytest.mark.parametrize("read", ["segments", "one_pass"])
def test_draft_only_reports_how_much_of_the_fact_is_kept(engine, read, monkeypatch):
    monkeypatch.setattr(engine.scorer.model.config, "max_position_embeddings", 600)
    doc = insert_needle(TEXT, 0.7, NEEDLES[3])
    row = draft_keeps_needle(engine, doc, NEEDLES[3], 0.7, read, settings())
    assert row.read == read and 0.0 <= row.needle_kept <= 1.0
    assert row.n_tokens > 600 and 0 < row.kept_fraction <= 0.25


def test_end_to_end_rows_for_both_runs(engine):
    doc = insert_needle(TEXT, 0.9, NEEDLES[4])
    rows = {r.run: r for r in ask_needle(engine, doc, NEEDLES[4], 0.9, "both", settings())}
    assert rows["baseline"].fit == "truncated" and rows["spec"].fit == "selected"
    assert rows["baseline"].needle_kept == 0.0  # the fact sits past the cut: the full prefill never saw it
    assert 0.0 <= rows["spec"].needle_kept <= 1.0 and rows["spec"].positions == "renumber"


def test_the_cli_refuses_a_depth_outside_the_text(capsys):
    from engine.cli.main import build_parser

    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["needles", "--doc", "a.pdf", "--depths", "50,120"])
    assert exit_.value.code == 2
    assert "0..100" in capsys.readouterr().err


def test_facts_placed_together_each_sit_near_their_depth():
    placed = [(0.1, NEEDLES[0]), (0.5, NEEDLES[2]), (0.9, NEEDLES[4])]
    doc = insert_needles(TEXT, placed)
    for depth, needle in placed:
        assert doc.count(needle.fact) == 1
        alone = insert_needle(TEXT, depth, needle)  # each where it would stand alone: the others move none
        assert doc.index(needle.fact) - alone.index(needle.fact) == sum(
            len(other.fact) + 2 for d, other in placed if d < depth
        )
    with pytest.raises(ValueError, match="same fact"):
        insert_needles(TEXT, [(0.1, NEEDLES[0]), (0.12, NEEDLES[0])])


def test_facts_asked_together_are_follow_ups_in_one_session(engine, monkeypatch):
    monkeypatch.setattr(engine, "draft_caches", DraftCaches(1 << 30))
    placed = [(0.01, NEEDLES[1]), (0.8, NEEDLES[3])]  # the cut full prefill sees the first 5% of TEXT
    rows = list(ask_needles_together(engine, TEXT, placed, "both", settings()))
    assert [(r.depth, r.run) for r in rows] == [
        (0.01, "spec"),
        (0.01, "baseline"),
        (0.8, "spec"),
        (0.8, "baseline"),
    ]
    spec_first, base_first, spec_next, base_next = rows
    assert (spec_first.served_by, spec_next.served_by) == ("spec", "spec_cached_draft")
    assert (base_first.served_by, base_next.served_by) == ("cold_full", "cached_full")
    assert base_first.fit == base_next.fit == "truncated"
    # the next question's cut document starts with the one the prefix context holds: only the rest is prefilled
    assert base_next.prefill_tokens < base_first.prefill_tokens / 4
    assert base_first.needle_kept == 1.0 and base_next.needle_kept == 0.0  # 80% lies past the cut


def test_together_and_draft_only_are_refused_together(capsys):
    from engine.cli.main import main

    assert main(["needles", "--doc", __file__, "--together", "--draft-only", "segments"]) == 2
    assert "--together" in capsys.readouterr().err
    assert main(["needles", "--doc", __file__, "--together", "--depths", "10,12"]) == 2  # one fact, twice
    assert "same fact" in capsys.readouterr().err
