from engine.eval.metrics import answer_agreement, is_correct, normalize


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
