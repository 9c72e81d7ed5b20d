"""Character spans of tokens (engine.core.spans), on random texts cut into random byte pieces: the
way any tokenizer's pieces add up to the text's UTF-8."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.core.spans import merge_spans, spans_of_tokens, token_char_spans, tokens_overlapping

TEXTS = st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=80)


@st.composite
def cut_text(draw):
    """A text and byte lengths that add up to its UTF-8 (cuts may fall inside a character)."""
    text = draw(TEXTS)
    n_bytes = len(text.encode("utf-8"))
    cuts = sorted(draw(st.sets(st.integers(1, max(n_bytes - 1, 1)), max_size=n_bytes)) - {n_bytes})
    bounds = [0, *cuts, n_bytes]
    return text, [b - a for a, b in zip(bounds, bounds[1:], strict=False)]


def covered(spans) -> set[int]:
    return {c for a, b in spans for c in range(a, b)}


@settings(max_examples=200, deadline=None)
@given(cut_text())
def test_the_tokens_spans_cover_the_text_in_order(case):
    text, lengths = case
    spans = token_char_spans(text, lengths)
    assert covered(spans) == set(range(len(text)))
    assert np.all(np.diff(spans[:, 0]) >= 0) and np.all(spans[:, 1] >= spans[:, 0])


@settings(max_examples=200, deadline=None)
@given(cut_text(), st.data())
def test_the_tokens_overlapping_kept_spans_cover_them(case, data):
    text, lengths = case
    spans = token_char_spans(text, lengths)
    kept = data.draw(st.lists(st.tuples(st.integers(0, len(text)), st.integers(0, len(text))), max_size=5))
    kept = merge_spans([(min(a, b), max(a, b)) for a, b in kept])
    chosen = tokens_overlapping(spans, kept, len(text))
    assert covered(kept) <= covered(spans[chosen])
    # ...and no token is taken that shares no character with them.
    assert all(covered([spans[i]]) & covered(kept) for i in chosen if spans[i][1] > spans[i][0])


@settings(max_examples=200, deadline=None)
@given(cut_text(), st.data())
def test_the_same_cut_maps_kept_tokens_to_themselves_where_no_cut_splits_a_character(case, data):
    text, lengths = case
    spans = token_char_spans(text, lengths)
    idx = data.draw(st.sets(st.integers(0, len(lengths) - 1)))
    chosen = set(tokens_overlapping(spans, spans_of_tokens(spans, sorted(idx)), len(text)).tolist())
    nonempty = {i for i in idx if spans[i][1] > spans[i][0]}
    assert nonempty <= chosen
    # A token beyond them shares a character with one of them: a cut inside a character.
    for extra in chosen - set(idx):
        assert covered([spans[extra]]) & covered(spans[sorted(idx)])


def test_a_token_that_splits_a_character_spans_all_of_it():
    text = "a😀b"  # the emoji is 4 bytes: cut 2 + 2
    spans = token_char_spans(text, [1, 2, 2, 1])
    assert spans.tolist() == [[0, 1], [1, 2], [1, 2], [2, 3]]


def test_merge_joins_touching_spans_and_drops_empty_ones():
    assert merge_spans([(5, 7), (0, 2), (2, 3), (4, 4)]).tolist() == [[0, 3], [5, 7]]
