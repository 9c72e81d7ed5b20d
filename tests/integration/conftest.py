"""Shared fixtures for tests on the real default models (assembled by `make setup`)."""

from pathlib import Path

import pytest

from engine.models import defaults as models

ROOT = Path(__file__).resolve().parents[2]
FAQ = ROOT / "engine" / "eval" / "calibration_sample.md"


def short_faq_excerpt(chars: int = 2400) -> str:
    """About 600 tokens of the zlib FAQ: real text nobody on the team wrote."""
    return FAQ.read_text()[:chars]


@pytest.fixture(scope="session")
def real_models_ready():
    for spec in models.DEFAULTS:
        status = models.model_status(spec)
        assert status.verified, (
            f"{spec.name} is not assembled and verified: run `make setup` ({status.detail})"
        )


@pytest.fixture
def short_doc(tmp_path) -> Path:
    path = tmp_path / "zlib-faq-excerpt.txt"
    path.write_text(short_faq_excerpt())
    return path
