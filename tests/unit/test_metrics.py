import json
from pathlib import Path

import pytest

from engine.eval.metrics import answer_agreement, is_correct, normalize

REPORTS = Path(__file__).resolve().parents[2] / "research"
DEV_SUITE_REPORTS = [
    REPORTS / "dev-suite" / "dev-suite-keep0.2.json",
    REPORTS / "dev-suite" / "dev-suite.json",
]


def test_normalize_collapses_whitespace_and_case():
    assert normalize("  The\n Port\tIS  8080 ") == "the port is 8080"


def test_is_correct_any_expected_string():
    assert is_correct("It listens on PORT\n8080.", ["port 8080", "9090"])
    assert not is_correct("It listens on 8081", ["8080"])
    assert not is_correct("anything", ["   "])


def test_agreement_bounds():
    assert answer_agreement("the cat sat on the mat", "the cat sat on the mat") == 1.0
    assert answer_agreement("alpha beta gamma", "delta epsilon") == 0.0
    assert 0.0 < answer_agreement("zlib is documented in zlib.h", "see zlib.h for docs") < 1.0
    assert answer_agreement("", "") == 1.0


# -- numbers match whole ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "answer", ["The grid has 160 divisions", "Since 2016", "about 1.16 inches", "16.5 mm", "16000 lines"]
)
def test_a_number_does_not_match_inside_a_longer_number(answer):
    assert not is_correct(answer, ["16"])


@pytest.mark.parametrize(
    "answer, expected",
    [
        ("The grid has 16 divisions.", "16"),
        ("16, as the manual says", "16"),
        ("(16)", "16"),
        ("the factor is 0.6", ".6"),
        ("60% of the length", "60%"),
        ("BLCR 0.8.2 is needed", "0.8.2"),
        ("add -DMPICH_IGNORE_CXX_SEEK to the command line", "MPICH_IGNORE_CXX_SEEK"),
        ("set to `'__no__default__'`", "__no__default__"),
        ("a SIGUSR1 signal", "SIGUSR1"),
        ("800x600 pixels", "800x600"),
    ],
)
def test_expected_strings_still_match(answer, expected):
    assert is_correct(answer, [expected])


# -- a space and an underscore between words -------------------------------------------------------
@pytest.mark.parametrize(
    "answer", ["is `HYDRA CKPOINT_INTERVAL`.", "HYDRA_CKPOINT_INTERVAL", "hydra ckpoint interval"]
)
def test_an_identifier_matches_with_spaces_or_underscores_between_its_words(answer):
    assert is_correct(answer, ["HYDRA CKPOINT INTERVAL"])  # as MPICH's guide reads, out of its PDF


@pytest.mark.parametrize(
    "answer, expected",
    [
        ("the class `HashedTuple`", "_HashedTuple"),  # a leading underscore is part of the name
        ("the prefix FLASK", "FLASK_"),  # so is a trailing one
        ("HYDRA-CKPOINT-INTERVAL", "HYDRA CKPOINT INTERVAL"),  # only a space or an underscore
        ("HYDRA CKPOINTINTERVAL", "HYDRA_CKPOINT_INTERVAL"),
    ],
)
def test_other_separators_and_outer_underscores_still_count(answer, expected):
    assert not is_correct(answer, [expected])


def test_recorded_dev_suite_verdicts_are_unchanged():
    """Every answer the dev-suite reports scored keeps its verdict (numbers on word boundaries changed none)."""
    for path in DEV_SUITE_REPORTS:
        for case in json.loads(path.read_text(encoding="utf-8"))["cases"]:
            if case["answers"] is None:
                continue
            for run in [case["baseline"], *case["spec"].values()]:
                assert is_correct(run["answer"], case["answers"]) is run["correct"], (path.name, case["id"])


# -- agreement in any script -----------------------------------------------------------------------
def test_identical_chinese_answers_agree_fully():
    answer = "网格每英寸分为十六格。"
    assert answer_agreement(answer, answer) == 1.0


def test_identical_russian_answers_agree_fully():
    answer = "Сетка делится на шестнадцать частей на дюйм."
    assert answer_agreement(answer, answer) == 1.0


@pytest.mark.parametrize(
    "reference, candidate",
    [
        ("北京是中国的首都", "上海是中国最大的城市"),
        ("Сетка делится на шестнадцать частей", "Сетка делится на восемь частей"),
    ],
)
def test_different_non_english_answers_agree_partly(reference, candidate):
    assert 0.0 < answer_agreement(reference, candidate) < 1.0


def test_recorded_english_agreement_is_unchanged():
    """The Unicode tokenizer keeps rouge-score's English tokens and stemming: the dev-suite figures still hold."""
    for path in DEV_SUITE_REPORTS:
        for case in json.loads(path.read_text(encoding="utf-8"))["cases"]:
            for keep, run in case["spec"].items():
                assert answer_agreement(case["baseline"]["answer"], run["answer"]) == pytest.approx(
                    run["agreement"], abs=1e-12
                ), (path.name, case["id"], keep)
