"""Prompts that do not fit, models that are missing, corrupt, tampered with or mismatched, and
machines without the memory: each is refused with the numbers or names the user needs, and
the CLI says it in one line with exit code 2."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from engine.core import memory as memory_budget
from engine.core.errors import ContextOverflowError, DefaultModelsError, InsufficientMemoryError
from engine.core.events import Notice, RunFinished
from engine.core.memory import format_bytes
from engine.core.settings import ModelSettings, RunSettings
from engine.llama.context_fit import fit_prompt
from engine.models import defaults as models
from engine.pipeline import Engine
from tests.fixtures.tiny_gguf import write_tiny_gguf_other_vocab, write_tiny_qwen2_gguf
from tests.reliability.support import assert_one_error_line, run_cli, tiny_model_flags

SENTENCE = "Item {i} is the {c} stone in the water. "
LONG_DOCUMENT = "".join(SENTENCE.format(i=i, c=["red", "blue", "green"][i % 3]) for i in range(60))
QUESTION = "Which item is the green stone?"
N_CTX = 512
MAX_NEW = 8


def tiny_settings(pair, **overrides) -> ModelSettings:
    target, draft = pair
    values = dict(target_path=target, draft_path=draft, n_ctx=N_CTX, n_batch=64, n_threads=1)
    values.update(overrides)
    return ModelSettings(**values)


def run_settings(**overrides) -> RunSettings:
    values = dict(force=True, keep=0.25, chunk_size=8, max_new_tokens=MAX_NEW)
    values.update(overrides)
    return RunSettings(**values)


# -- the context window ---------------------------------------------------------------------


def test_a_prompt_over_the_context_is_refused_with_the_numbers(engine):
    n = engine.prepare(LONG_DOCUMENT, QUESTION, run_settings()).n_tokens
    assert n > N_CTX
    with pytest.raises(
        ContextOverflowError
    ) as err:  # a full prefill alone (SpecPrefill fits it by selection)
        list(engine.stream(LONG_DOCUMENT, QUESTION, "baseline", run_settings()))
    message = str(err.value)
    for number in (n, MAX_NEW, n + MAX_NEW, N_CTX, n + MAX_NEW - N_CTX):
        assert str(number) in message
    assert "truncation" in message


def test_truncation_cuts_the_document_end_keeps_the_question_and_says_so(engine):
    settings = run_settings(truncate=True)
    full = engine.prepare(LONG_DOCUMENT, QUESTION, settings)
    events = list(engine.stream(LONG_DOCUMENT, QUESTION, "both", settings))
    notices = [e.message for e in events if isinstance(e, Notice)]
    results = {e.run: e.result for e in events if isinstance(e, RunFinished)}
    cut = full.n_tokens + MAX_NEW - N_CTX
    cut_notices = [m for m in notices if f"its last {cut} of" in m and "question was kept" in m]
    assert len(cut_notices) == 1  # the full prefill's; SpecPrefill reads the whole document and selects
    base, spec = results["baseline"], results["spec"]
    assert base.prompt_tokens == N_CTX - MAX_NEW
    assert base.truncated_tokens == cut and base.truncated_chars > 0 and base.fit == "truncated"
    assert spec.prompt_tokens == full.n_tokens and spec.truncated_tokens == 0 and spec.fit == "selected"
    assert spec.prefill_tokens <= N_CTX - MAX_NEW
    for result in results.values():
        assert result.generated_tokens == MAX_NEW


def test_the_cut_prompt_is_the_head_of_the_document_then_the_same_question(engine):
    full = engine.prepare(LONG_DOCUMENT, QUESTION, run_settings())
    cut, info = fit_prompt(engine.runtime.model, full, N_CTX, MAX_NEW, truncate=True)
    start, end = full.doc_token_span
    np.testing.assert_array_equal(cut.tokens[:start], full.tokens[:start])
    np.testing.assert_array_equal(cut.tokens[cut.tail_start :], full.tokens[end:])  # the question, whole
    assert LONG_DOCUMENT.startswith(cut.parts.document)
    assert len(cut.parts.document) == len(LONG_DOCUMENT) - info.cut_chars
    assert cut.parts.suffix == full.parts.suffix


def test_truncation_cannot_make_room_when_the_question_alone_overflows(engine):
    with pytest.raises(ContextOverflowError, match="even without the document"):
        list(
            engine.stream(
                LONG_DOCUMENT, QUESTION, "baseline", run_settings(truncate=True, max_new_tokens=N_CTX)
            )
        )


def test_cli_refuses_then_truncates_on_request(capsys, pair, cache_home, tmp_path):
    doc = tmp_path / "long.txt"
    doc.write_text(LONG_DOCUMENT)
    args = [
        "run",
        "--doc",
        str(doc),
        "--question",
        QUESTION,
        "--mode",
        "baseline",
        "--max-new-tokens",
        str(MAX_NEW),
        *tiny_model_flags(*pair),
    ]
    code, lines = run_cli(capsys, *args)
    assert_one_error_line(code, lines, "context window is 512 tokens")
    code, lines = run_cli(capsys, *args, "--truncate")
    assert code == 0
    assert any("document was cut to fit the context window" in line for line in lines)
    assert any("TRUNCATED:" in line for line in lines)


# -- models ---------------------------------------------------------------------------------


def test_a_missing_model_file(capsys, pair, cache_home, tmp_path):
    target, _ = pair
    code, lines = run_cli(
        capsys,
        "run",
        "--doc",
        __file__,
        "--question",
        "q?",
        *tiny_model_flags(target, tmp_path / "missing.gguf"),
    )
    assert_one_error_line(code, lines, "draft model not found", "missing.gguf")


@pytest.mark.parametrize("role", ["target", "draft"])
def test_a_corrupt_gguf_is_named(capsys, pair, cache_home, tmp_path, role):
    garbage = tmp_path / f"broken-{role}.gguf"
    garbage.write_bytes(b"GGUF" + np.random.default_rng(0).bytes(4096))
    target, draft = pair
    paths = (garbage, draft) if role == "target" else (target, garbage)
    code, lines = run_cli(capsys, "run", "--doc", __file__, "--question", "q?", *tiny_model_flags(*paths))
    assert_one_error_line(code, lines, "could not load", garbage.name)


def test_a_draft_with_another_vocabulary_selects_through_spans(pair, cache_home, tmp_path):
    other = write_tiny_gguf_other_vocab(tmp_path / "stranger-draft.gguf")
    engine = Engine.load(tiny_settings(pair, draft_path=other))
    try:
        assert engine.info.selection == "spans"
    finally:
        engine.close()


@pytest.fixture
def default_models_home(tmp_path, monkeypatch):
    """An empty cache dir for the default models, and no pip: a run must never download."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))

    def no_subprocess(*args, **kwargs):
        raise AssertionError(f"a run started a subprocess: {args}")

    monkeypatch.setattr(subprocess, "run", no_subprocess)
    return tmp_path


def test_missing_default_models_are_reported_not_downloaded(capsys, default_models_home):
    with pytest.raises(DefaultModelsError, match="is missing at"):
        Engine.load(ModelSettings(n_threads=1))
    code, lines = run_cli(capsys, "run", "--doc", __file__, "--question", "q?")
    assert_one_error_line(code, lines, "is missing at", "re-assemble the defaults", "models --assemble")


def test_a_default_model_failing_its_hash_is_refused(capsys, default_models_home):
    for spec in models.DEFAULTS:
        spec.path.parent.mkdir(parents=True, exist_ok=True)
        spec.path.write_bytes(b"not the model")
    with pytest.raises(DefaultModelsError, match="fails its sha256 check"):
        Engine.load(ModelSettings(n_threads=1))
    code, lines = run_cli(capsys, "run", "--doc", __file__, "--question", "q?")
    assert_one_error_line(code, lines, "sha256", "models --assemble")


# -- memory -------------------------------------------------------------------------------


def pretend_free(monkeypatch, n_bytes: int) -> None:
    monkeypatch.setattr(memory_budget, "available_bytes", lambda device: n_bytes)


def test_loading_is_refused_with_the_numbers_when_memory_is_short(pair, cache_home, monkeypatch):
    pretend_free(monkeypatch, 100_000)
    with pytest.raises(InsufficientMemoryError) as err:
        Engine.load(tiny_settings(pair))
    message = str(err.value)
    # 2 layers x (K and V) x 2 KV heads x 16 dims x 2 bytes x 512 tokens
    assert f"target KV cache for 512 tokens {format_bytes(2 * 2 * 2 * 16 * 2 * 512)}" in message
    assert "target weights" in message and "draft weights" in message
    assert f"only {format_bytes(100_000)} is available" in message


def test_a_context_no_machine_can_hold_is_refused_before_allocating(pair, cache_home, tmp_path):
    roomy = write_tiny_qwen2_gguf(tmp_path / "roomy-target.gguf", seed=1, n_ctx=1_000_000_000)
    with pytest.raises(InsufficientMemoryError, match="loading the models with a 1000000000-token context"):
        Engine.load(tiny_settings(pair, target_path=roomy, n_ctx=1_000_000_000))


def test_a_spec_run_whose_draft_cache_cannot_fit_is_refused_then_the_next_run_works(engine, monkeypatch):
    prompt = engine.prepare(LONG_DOCUMENT[:400], QUESTION, run_settings())
    n, question_rows = prompt.n_tokens, prompt.question_rows
    pretend_free(monkeypatch, 1000)
    with pytest.raises(InsufficientMemoryError) as err:
        list(engine.stream(LONG_DOCUMENT[:400], QUESTION, "spec", run_settings()))
    message = str(err.value)
    # fp32 draft: 2 layers x 2 x 2 KV heads x 16 dims x 4 bytes per token; look-ahead rows 2 x 2 x 4 x 4
    assert f"draft scoring of {n} tokens" in message
    assert f"draft KV cache {format_bytes(2 * 2 * 2 * 16 * 4 * n)}" in message
    assert f"look-ahead attention {format_bytes(2 * 2 * 4 * 4 * n)}" in message
    # the question's rows, scored by default: logits, masked and softmaxed, 4 heads x 4 bytes
    assert (
        question_rows > 0 and f"question attention {format_bytes(3 * question_rows * 4 * 4 * n)}" in message
    )
    monkeypatch.undo()
    events = list(engine.stream(LONG_DOCUMENT[:400], QUESTION, "spec", run_settings()))
    assert [e.result.generated_tokens for e in events if isinstance(e, RunFinished)] == [MAX_NEW]


def test_the_draft_memory_check_leaves_out_the_question_rows_when_they_are_not_scored(engine, monkeypatch):
    pretend_free(monkeypatch, 1000)
    with pytest.raises(InsufficientMemoryError) as err:
        list(engine.stream(LONG_DOCUMENT[:400], QUESTION, "spec", run_settings(score_question=False)))
    assert "look-ahead attention" in str(err.value) and "question attention" not in str(err.value)
