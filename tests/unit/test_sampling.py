"""Sampling the answer through llama.cpp's sampler chain, on a tiny random Qwen2 GGUF: seeded runs repeat,
greedy stays the argmax, the settings are checked, and compares, A/B suites and benchmarks stay greedy."""

from __future__ import annotations

import numpy as np
import pytest

from engine.cli.main import build_parser
from engine.cli.options import run_settings_from
from engine.core.errors import SettingsError
from engine.core.setting_schema import options
from engine.core.settings import RunSettings, greedy, sampling_fields
from engine.eval.ab import run_suite
from engine.eval.ab_environment import settings_record
from engine.eval.bench import bench_settings
from engine.eval.suite import load_suite
from engine.llama.native import LlamaContext, LlamaModel
from engine.llama.runtime import TargetRuntime
from engine.llama.sampler import GREEDY, SamplingParams, TokenSampler
from engine.pipeline.request import for_run
from tests.fixtures.tiny_gguf import write_tiny_qwen2_gguf
from tests.unit.test_suite_and_ab import KEEPS, FakeEngine, suite_dir, suite_path  # noqa: F401 (fixtures)

ANSWER_TOKENS = 12
SAMPLING = dict(temperature=1.5, top_p=0.95, top_k=40, min_p=0.01, seed=1234)
SAMPLED = RunSettings(**SAMPLING, presence_penalty=0.5, frequency_penalty=0.2, repeat_penalty=1.1)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    m = LlamaModel(write_tiny_qwen2_gguf(tmp_path_factory.mktemp("tiny") / "tiny.gguf", seed=7))
    yield m
    m.close()


@pytest.fixture(scope="module")
def runtime(model):
    rt = TargetRuntime(model, LlamaContext(model, n_ctx=256, n_batch=64, n_threads=1), owns_model=False)
    yield rt
    rt.close()


def answer(
    runtime: TargetRuntime, sampling: SamplingParams = GREEDY, max_new: int = ANSWER_TOKENS
) -> list[int]:
    """The answer's tokens after a fresh prefill of the same prompt."""
    tokens = np.array(runtime.model.tokenize("Hello the world, it is", parse_special=False), np.int32)
    logits = runtime.prefill(tokens, np.arange(len(tokens), dtype=np.int32))
    return [g.token for g in runtime.generate(logits, len(tokens), max_new, sampling=sampling)]


def argmax_answer(runtime: TargetRuntime, max_new: int = ANSWER_TOKENS) -> list[int]:
    """The greedy answer decoded by hand: the argmax after every step, stopping at end-of-generation."""
    tokens = np.array(runtime.model.tokenize("Hello the world, it is", parse_special=False), np.int32)
    logits, position, out = runtime.prefill(tokens, np.arange(len(tokens), dtype=np.int32)), len(tokens), []
    for _ in range(max_new):
        token = int(np.argmax(logits))
        if runtime.model.is_eog(token):
            break
        out.append(token)
        runtime.context.decode(np.array([token], np.int32), np.array([position], np.int32), True)
        logits, position = runtime.context.last_logits(), position + 1
    return out


# -- the runtime's answer ------------------------------------------------------------------------


def test_greedy_is_the_argmax_of_every_step(runtime):
    expected = argmax_answer(runtime)
    assert len(expected) > 1
    assert answer(runtime) == expected
    assert answer(runtime, SamplingParams.from_settings(RunSettings())) == expected
    assert SamplingParams.from_settings(RunSettings(top_k=5, top_p=0.5, seed=3)).greedy  # no temperature


def test_the_same_seed_gives_the_same_answer(runtime):
    params = SamplingParams.from_settings(SAMPLED)
    first = answer(runtime, params)
    assert len(first) > 1
    assert answer(runtime, params) == first


def test_different_seeds_give_different_answers(runtime):
    answers = {tuple(answer(runtime, SamplingParams(temperature=2.0, seed=seed))) for seed in range(6)}
    assert len(answers) >= 2


def test_top_k_one_is_greedy_whatever_the_seed(runtime):
    expected = argmax_answer(runtime)
    for seed in (1, 2, 3):
        assert answer(runtime, SamplingParams(temperature=2.0, top_k=1, seed=seed)) == expected


def test_an_unseeded_run_draws_its_own_seed(model):
    seeds = set()
    for _ in range(4):
        with TokenSampler(SamplingParams(temperature=1.0), model.n_vocab) as sampler:
            seeds.add(sampler.seed)
    assert len(seeds) > 1


# -- the sampler on given logits -------------------------------------------------------------------


def test_flat_logits_are_drawn_from_the_whole_vocabulary():
    flat = np.zeros(300, np.float32)
    firsts = set()
    for seed in range(10):
        with TokenSampler(SamplingParams(temperature=1.0, seed=seed), len(flat)) as sampler:
            firsts.add(sampler.sample(flat))
    assert len(firsts) >= 5


def test_the_chain_reads_the_logits_it_is_given():
    logits = np.random.default_rng(0).standard_normal(300).astype(np.float32)
    # A penalty makes it a llama.cpp chain; with nothing chosen yet it penalizes nothing.
    with TokenSampler(SamplingParams(repeat_penalty=1.5), len(logits)) as sampler:
        assert sampler.sample(logits) == int(np.argmax(logits))


@pytest.mark.parametrize(
    "penalty", [dict(presence_penalty=2.0), dict(frequency_penalty=2.0), dict(repeat_penalty=2.0)]
)
def test_penalties_count_the_tokens_already_chosen(penalty):
    logits = np.zeros(300, np.float32)
    logits[[5, 6]] = 1.0, 0.9
    with TokenSampler(SamplingParams(**penalty), len(logits)) as sampler:
        assert [sampler.sample(logits), sampler.sample(logits)] == [5, 6]


def draws(params: SamplingParams, logits: np.ndarray, n: int = 10) -> set[int]:
    with TokenSampler(params, len(logits)) as sampler:
        return {sampler.sample(logits) for _ in range(n)}


def test_min_p_and_top_p_drop_the_less_likely():
    logits = np.full(300, -30.0, np.float32)
    logits[[7, 8]] = 1.0, 0.9  # two tokens almost equally likely, the rest never drawn
    assert draws(SamplingParams(temperature=1.0, seed=1), logits) == {7, 8}
    assert draws(SamplingParams(temperature=1.0, min_p=0.95, seed=1), logits) == {7}
    assert draws(SamplingParams(temperature=1.0, top_p=0.5, seed=1), logits) == {7}
    assert draws(SamplingParams(temperature=1.0, top_k=1, seed=1), logits) == {7}


def test_a_closed_sampler_refuses_to_sample_and_closes_once():
    sampler = TokenSampler(SamplingParams(temperature=1.0, seed=1), 10)
    sampler.close()
    sampler.close()
    with pytest.raises(RuntimeError, match="closed"):
        sampler.sample(np.zeros(10, np.float32))


# -- the settings ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "values, needle",
    [
        (dict(temperature=-0.1), "temperature"),
        (dict(temperature=2.5), "temperature"),
        (dict(top_p=1.5), "top p"),
        (dict(top_p=-0.1), "top p"),
        (dict(top_k=-1), "top k"),
        (dict(min_p=1.5), "min p"),
        (dict(seed=-1), "seed"),
        (dict(seed=2**32 - 1), "seed"),
        (dict(presence_penalty=2.5), "presence penalty"),
        (dict(frequency_penalty=-2.5), "frequency penalty"),
        (dict(repeat_penalty=0.0), "repeat penalty"),
        (dict(repeat_penalty=2.5), "repeat penalty"),
        (dict(temperature=float("nan")), "temperature"),
    ],
)
def test_sampling_settings_refuse_values_out_of_range(values, needle):
    with pytest.raises(SettingsError, match=needle):
        RunSettings(**values)


def test_sampling_boundaries_that_are_allowed():
    RunSettings(temperature=2.0, top_p=0.0, top_k=0, min_p=1.0, seed=0, repeat_penalty=2.0)
    RunSettings(seed=2**32 - 2, presence_penalty=-2.0, frequency_penalty=2.0, repeat_penalty=0.01)


def test_the_defaults_are_greedy_and_grouped_as_sampling():
    assert SamplingParams.from_settings(RunSettings()) == GREEDY and GREEDY.greedy
    assert set(sampling_fields()) == {
        "temperature",
        "top_p",
        "top_k",
        "min_p",
        "seed",
        "presence_penalty",
        "frequency_penalty",
        "repeat_penalty",
    }
    labelled = {name for name, option, _ in options(RunSettings) if option.label}
    assert set(sampling_fields()) <= labelled  # all in the app's Settings


def test_the_cli_sets_the_sampling_settings():
    args = build_parser().parse_args(
        ["run", "--doc", "d.txt", "--question", "q", "--temperature", "0.7", "--top-k", "40", "--seed", "9"]
        + ["--top-p", "0.9", "--min-p", "0.05", "--repeat-penalty", "1.1", "--presence-penalty", "0.5"]
        + ["--frequency-penalty", "0.25"]
    )
    assert SamplingParams.from_settings(run_settings_from(args)) == SamplingParams(
        temperature=0.7,
        top_p=0.9,
        top_k=40,
        min_p=0.05,
        seed=9,
        presence_penalty=0.5,
        frequency_penalty=0.25,
        repeat_penalty=1.1,
    )
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--doc", "d.txt", "--question", "q", "--temperature", "3"])


# -- compares, A/B suites and benchmarks stay greedy ------------------------------------------------
@pytest.mark.parametrize(
    "verb", [["ab", "--suite", "s.jsonl"], ["bench", "--doc", "d.txt"], ["needles", "--doc", "d.txt"]]
)
def test_the_verbs_that_compare_offer_no_sampling_flag(verb, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args([*verb, "--temperature", "0.7"])
    assert "--temperature" in capsys.readouterr().err


def test_greedy_resets_every_sampling_setting_and_nothing_else():
    settings = RunSettings(keep=0.3, max_new_tokens=9, **SAMPLING, repeat_penalty=1.3)
    plain = greedy(settings)
    assert SamplingParams.from_settings(plain) == GREEDY
    assert (plain.keep, plain.max_new_tokens) == (0.3, 9)


@pytest.mark.parametrize("run", ["baseline", "spec"])
def test_both_runs_of_a_compare_are_greedy(run):
    assert SamplingParams.from_settings(for_run(run, SAMPLED, compare=True)).greedy
    assert for_run(run, SAMPLED, compare=False) == SAMPLED  # a single run samples as asked


def test_the_bench_is_greedy():
    assert SamplingParams.from_settings(bench_settings(SAMPLED, respect_threshold=False)).greedy


def test_an_ab_suite_runs_and_records_greedy(suite_path):  # noqa: F811 (a fixture)
    engine = FakeEngine()
    events = list(run_suite(engine, load_suite(suite_path), KEEPS, SAMPLED))
    assert engine.calls and all(SamplingParams.from_settings(call[3]).greedy for call in engine.calls)
    recorded = events[-1].report.environment.settings
    assert recorded == settings_record(RunSettings()) and recorded["temperature"] == 0.0


def test_the_engine_samples_a_single_run_and_keeps_a_compare_greedy(engine, monkeypatch):
    asked: list[SamplingParams] = []
    generate = engine.runtime.generate

    def spy(first_logits, next_position, max_new_tokens, cancel, sampling=GREEDY):
        asked.append(sampling)
        return generate(first_logits, next_position, max_new_tokens, cancel, sampling=sampling)

    monkeypatch.setattr(engine.runtime, "generate", spy)
    document = "The red stone is in the water. " * 6
    settings = RunSettings(force=True, keep=0.5, chunk_size=8, max_new_tokens=4, **SAMPLING)
    list(engine.stream(document, "Where is the stone?", "baseline", settings))
    assert asked == [SamplingParams.from_settings(settings)]
    asked.clear()
    list(engine.stream(document, "Where is the stone?", "both", settings))
    assert len(asked) == 2 and all(params.greedy for params in asked)
