"""Errors cross the worker thread as exception objects; the window acts on their type, never their words."""

from __future__ import annotations

import pytest

from desktop.model.failure_text import failure_text
from engine.api import (
    ContextOverflowError,
    DefaultModelsError,
    IngestError,
    NotCalibratedError,
    PasswordError,
    PositionsUnsupportedError,
    SettingsError,
)
from tests.gui.conftest import fake_load_document, wait_run_done


def password_loader(secret: str, error_text: str):
    """The fake loader, but the file needs `secret`; a missing or wrong one raises PasswordError(error_text)."""

    def load(path, *, password=None, cancel=None, progress=None):
        if password != secret:
            raise PasswordError(error_text)
        return fake_load_document(path, password=None, cancel=cancel, progress=progress)

    return load


def test_a_password_error_opens_the_prompt_whatever_its_message_says(make_window, qtbot, short_txt):
    asked = []

    def ask(parent, path, wrong_before):
        asked.append(wrong_before)
        return "guess" if len(asked) == 1 else "s3cret"

    window = make_window(ask_password=ask, loader=password_loader("s3cret", "locked"))  # neither word in it
    window.open_path(str(short_txt))
    qtbot.waitUntil(lambda: window.documents.document is not None, timeout=3000)
    assert asked == [False, True]  # the second prompt knows a password was tried
    assert window.banner.kind == ""


def test_a_plain_error_that_mentions_a_password_does_not_prompt(make_window, qtbot, short_txt):
    asked = []

    def broken(path, *, password=None, cancel=None, progress=None):
        raise IngestError("the form's encrypted password field is damaged")

    window = make_window(ask_password=lambda *a: asked.append(a) or "pw", loader=broken)
    window.open_path(str(short_txt))
    qtbot.waitUntil(lambda: window.banner.kind == "error", timeout=3000)
    assert asked == []
    assert window.banner.text == "the form's encrypted password field is damaged"


@pytest.mark.parametrize(
    ("error_type", "remedy"),
    [
        (ContextOverflowError, "turn on Settings ▸ Long documents"),
        (PositionsUnsupportedError, "choose renumber or auto in Positions"),
        (SettingsError, "check Settings"),
    ],
)
def test_a_run_error_gets_the_apps_own_remedy(loaded_window, qtbot, fake_config, error_type, remedy):
    fake_config.fail_stage, fake_config.fail_error_type = "prefill", error_type
    window = loaded_window
    window.controls.baseline_button.click()
    wait_run_done(qtbot, window)
    assert window.banner.kind == "error"
    assert window.banner.text.startswith("fake failure during prefill")
    assert remedy in window.banner.text
    assert "--" not in window.banner.text  # no command-line flags in the app


def test_a_broken_default_model_offers_to_re_assemble_whatever_its_message(make_window, qtbot, fake_config):
    fake_config.load_error, fake_config.load_error_type = "hash mismatch", DefaultModelsError
    assembled = []
    window = make_window(wait_ready=False, assemble_models=lambda progress, cancel: assembled.append(1))
    qtbot.waitUntil(lambda: window.banner.kind == "error", timeout=3000)
    assert window.banner.action_button.isVisibleTo(window.banner)
    assert window.banner.action_button.text() == "Re-assemble default models"
    fake_config.load_error = None
    window.banner.action_button.click()
    qtbot.waitUntil(lambda: window.host.is_ready, timeout=3000)
    assert assembled == [1]


def test_other_model_errors_offer_nothing(make_window, qtbot, fake_config):
    fake_config.load_error = (
        "the default target is missing"  # a plain SpecPrefillError: words alone offer nothing
    )
    window = make_window(wait_ready=False, assemble_models=lambda progress, cancel: None)
    qtbot.waitUntil(lambda: window.banner.kind == "error", timeout=3000)
    assert not window.banner.action_button.isVisibleTo(window.banner)


def test_failure_text_words_each_kind_of_error():
    assert failure_text(NotCalibratedError("no calibration"), "estimate").startswith("no calibration (")
    assert failure_text(IngestError("bad file"), "loading") == "bad file"
    assert failure_text(KeyError("x"), "token count") == "Unexpected error in token count: KeyError: 'x'"
