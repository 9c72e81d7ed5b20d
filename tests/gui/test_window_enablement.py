"""The window applies desktop.model.view_state's rules: its widgets agree with enablement(view_state())."""

from __future__ import annotations

from tests.gui.conftest import wait_run_done


def widget_flags(window) -> dict[str, bool]:
    controls = window.controls
    return {
        "run": all(button.isEnabled() for button in controls.run_buttons),
        "cancel": controls.cancel_button.isEnabled(),
        "calibrate": window.calibrate_action.isEnabled(),
        "open_document": all(
            action.isEnabled()
            for action in (
                window.open_file_action,
                window.open_folder_action,
                window.recent_menu.menuAction(),
            )
        ),
        "clear_thread": window.clear_thread_action.isEnabled()
        and window.thread_view.clear_button.isEnabled(),
    }


def expected_flags(window) -> dict[str, bool]:
    allowed = window.enablement()
    return {
        name: getattr(allowed, name)
        for name in ("run", "cancel", "calibrate", "open_document", "clear_thread")
    }


def test_the_widgets_follow_the_view_state_through_a_run(loaded_window, qtbot, fake_config):
    window = loaded_window
    fake_config.token_s = 0.02
    assert window.view_state().document_loaded and window.view_state().has_question
    assert (
        widget_flags(window)
        == expected_flags(window)
        == {"run": True, "cancel": False, "calibrate": True, "open_document": True, "clear_thread": True}
    )

    assert window.start_run("both")
    assert window.view_state().run_active
    assert (
        widget_flags(window)
        == expected_flags(window)
        == {"run": False, "cancel": True, "calibrate": False, "open_document": False, "clear_thread": False}
    )
    assert (
        window.controls.compare_button.toolTip() == window.enablement().run_reason == "A run is in progress"
    )

    wait_run_done(qtbot, window)
    assert widget_flags(window) == expected_flags(window)
    assert widget_flags(window)["run"] and not widget_flags(window)["cancel"]


def test_before_the_models_load_only_opening_is_allowed(make_window, fake_config):
    fake_config.load_step_s = 0.05
    window = make_window(wait_ready=False)
    assert window.view_state().engine_loading
    assert (
        widget_flags(window)
        == expected_flags(window)
        == {"run": False, "cancel": True, "calibrate": False, "open_document": True, "clear_thread": False}
    )
