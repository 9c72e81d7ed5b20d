"""Settings ▸ Remote workers (ModelSettings.rpc): editing, persistence, Test connection, and the
status bar naming the target's backends. Only 127.0.0.1 addresses; nothing here starts a worker."""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass

import pytest
from PySide6.QtCore import QSettings, Qt
from PySide6.QtWidgets import QDialogButtonBox, QStatusBar

from desktop.model.preferences import RunPreferences
from desktop.sessions.settings_store import SettingsStore
from desktop.widgets import remote_workers
from desktop.widgets.engine_status import EngineStatus, devices_text
from desktop.widgets.remote_workers import RemoteWorkersPanel, memory_text
from desktop.widgets.settings_dialog import SettingsDialog
from engine.api import DEFAULT_WORKER_PORT, Endpoint, ModelSettings, WorkerMemory
from tests.gui.conftest import FakeInfo

TWO_WORKERS = "127.0.0.1:50052,127.0.0.1:50053"


def free_port() -> int:
    """A port nothing listens on: bound by us for a moment, then let go."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def panel(qtbot) -> RemoteWorkersPanel:
    panel = RemoteWorkersPanel()
    qtbot.addWidget(panel)
    return panel


@pytest.fixture
def dialog(qtbot) -> SettingsDialog:
    dialog = SettingsDialog(ModelSettings(), RunPreferences())
    qtbot.addWidget(dialog)
    return dialog


def add(panel: RemoteWorkersPanel, text: str) -> bool:
    panel.entry.setText(text)
    return panel.add_entry()


def rows(panel: RemoteWorkersPanel) -> list[str]:
    return [panel.workers.item(i).text() for i in range(panel.workers.count())]


# --- editing the list -----------------------------------------------------------------------------


def test_add_lists_the_worker_and_clears_the_entry(panel):
    assert not panel.test_button.isEnabled() and not panel.remove_button.isEnabled()
    assert add(panel, " 127.0.0.1:50052 ")
    assert rows(panel) == ["127.0.0.1:50052"]
    assert panel.endpoints() == (Endpoint("127.0.0.1", 50052),)
    assert panel.entry.text() == "" and panel.error.text() == ""
    assert panel.test_button.isEnabled()


def test_a_bare_host_gets_the_default_worker_port(panel):
    assert add(panel, "127.0.0.1")
    assert panel.field_value() == f"127.0.0.1:{DEFAULT_WORKER_PORT}"


@pytest.mark.parametrize("bad", ["127.0.0.1:notaport", "127.0.0.1:70000", ":50052"])
def test_a_malformed_entry_is_refused_inline_and_nothing_is_added(panel, bad):
    assert not add(panel, bad)
    assert panel.endpoints() == ()
    assert "RPC worker" in panel.error.text() and bad.strip() in panel.error.text()
    assert panel.entry.text() == bad  # kept, so it can be corrected
    panel.entry.textEdited.emit("127.0.0.1:1")  # typing again clears the message
    assert panel.error.text() == ""


def test_a_worker_listed_twice_is_refused(panel):
    assert add(panel, "127.0.0.1:50052")
    assert not add(panel, "127.0.0.1:50052")
    assert panel.field_value() == "127.0.0.1:50052"
    assert panel.error.text() == "RPC worker 127.0.0.1:50052 is already listed"


def test_enter_in_the_entry_adds_and_does_not_accept_the_dialog(dialog, qtbot):
    dialog.show()
    accepted = []
    dialog.accepted.connect(lambda: accepted.append(True))
    dialog.remote_workers.entry.setFocus()
    qtbot.keyClicks(dialog.remote_workers.entry, "127.0.0.1:50052")
    qtbot.keyClick(dialog.remote_workers.entry, Qt.Key.Key_Return)
    assert dialog.remote_workers.field_value() == "127.0.0.1:50052"
    assert accepted == [] and dialog.isVisible()


def test_remove_drops_the_selected_worker(panel):
    panel.set_field_value("127.0.0.1:50052,127.0.0.1:50053,127.0.0.1:50054")
    assert not panel.remove_button.isEnabled()  # nothing selected yet
    panel.workers.setCurrentRow(1)
    assert panel.remove_button.isEnabled()
    panel.remove_button.click()
    assert panel.field_value() == "127.0.0.1:50052,127.0.0.1:50054"
    assert panel.workers.currentRow() == 1  # the next one is selected, so Remove can be clicked again
    panel.remove_button.click()
    panel.remove_button.click()
    assert panel.field_value() == "" and not panel.remove_button.isEnabled()


# --- the dialog's result and persistence ------------------------------------------------------------


def test_the_dialog_shows_the_workers_and_returns_them_as_rpc(qtbot):
    dialog = SettingsDialog(ModelSettings(rpc=TWO_WORKERS), RunPreferences())
    qtbot.addWidget(dialog)
    assert rows(dialog.remote_workers) == ["127.0.0.1:50052", "127.0.0.1:50053"]
    assert dialog.editor("rpc") is dialog.remote_workers
    assert add(dialog.remote_workers, "127.0.0.1:50054")
    assert dialog.model_settings() == ModelSettings(rpc=TWO_WORKERS + ",127.0.0.1:50054")
    dialog.restore_button.click()
    assert dialog.remote_workers.endpoints() == ()
    assert dialog.model_settings() == ModelSettings()


def test_other_workers_drop_an_explicit_split_that_named_the_old_ones(qtbot):
    base = ModelSettings(rpc=TWO_WORKERS, rpc_split="2,1,1")
    dialog = SettingsDialog(base, RunPreferences())
    qtbot.addWidget(dialog)
    assert dialog.model_settings() == base  # untouched workers keep their split
    dialog.remote_workers.workers.setCurrentRow(0)
    dialog.remote_workers.remove_selected()
    assert dialog.model_settings() == ModelSettings(rpc="127.0.0.1:50053", rpc_split="")


def test_the_workers_persist_across_a_restart(dialog, qsettings):
    add(dialog.remote_workers, "127.0.0.1:50052")
    add(dialog.remote_workers, "127.0.0.1:50053")
    SettingsStore(qsettings).save_model_settings(dialog.model_settings())
    restarted = SettingsStore(QSettings(qsettings.fileName(), QSettings.Format.IniFormat))
    assert restarted.model_settings().rpc == TWO_WORKERS
    reopened = SettingsDialog(restarted.model_settings(), restarted.run_preferences())
    assert reopened.remote_workers.field_value() == TWO_WORKERS
    reopened.deleteLater()


@pytest.mark.parametrize(
    ("stored", "expected"),
    [
        ({"models/rpc": "not-a-worker"}, ModelSettings()),
        (
            {"models/rpc": "127.0.0.1:50052", "models/rpc_split": "1,1,1"},
            ModelSettings(rpc="127.0.0.1:50052"),
        ),
        (
            {"models/rpc": "127.0.0.1:50052", "models/n_ctx": 4096},
            ModelSettings(rpc="127.0.0.1:50052", n_ctx=4096),
        ),
    ],
)
def test_stored_workers_the_engine_refuses_read_as_the_default(qsettings, stored, expected):
    for key, value in stored.items():
        qsettings.setValue(key, value)
    assert SettingsStore(qsettings).model_settings() == expected


def test_changing_the_workers_reloads_the_engine(window, qtbot, engine_factory):
    dialog = window.open_settings()
    assert add(dialog.remote_workers, "127.0.0.1:50052")
    dialog.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok).click()
    qtbot.waitUntil(lambda: len(engine_factory.built) == 2 and window.host.is_ready, timeout=3000)
    assert engine_factory.settings_seen[-1].rpc == "127.0.0.1:50052"
    assert window.store.model_settings().rpc == "127.0.0.1:50052"


# --- Test connection -----------------------------------------------------------------------------


def test_memory_text_says_what_a_worker_lends_or_why_not():
    endpoint = Endpoint("127.0.0.1", 50052)
    lends = memory_text(WorkerMemory(endpoint, free_bytes=2 * 1024**3, total_bytes=4 * 1024**3))
    assert lends.startswith("lends ") and " of " in lends and "2.0" in lends and "4.0" in lends
    busy = "no answer in 10 s (busy serving another client?)"
    assert memory_text(WorkerMemory(endpoint, error=busy)) == busy


def test_test_connection_reports_a_refused_worker_without_blocking(panel, qtbot):
    port = free_port()
    panel.set_field_value(f"127.0.0.1:{port}")
    panel.test_button.click()
    # The answer comes from a pool thread through the event loop: right after the click it is not in yet.
    assert rows(panel) == [f"127.0.0.1:{port}  —  testing…"]
    assert not panel.test_button.isEnabled()
    qtbot.waitUntil(lambda: "refused the connection" in rows(panel)[0], timeout=5000)
    assert rows(panel) == [f"127.0.0.1:{port}  —  refused the connection"]
    qtbot.waitUntil(panel.test_button.isEnabled, timeout=10000)
    assert panel.field_value() == f"127.0.0.1:{port}"  # the answer is shown, not part of the value


def test_slow_workers_are_asked_off_the_gui_thread_and_answer_one_by_one(panel, qtbot, monkeypatch):
    gui_thread = threading.get_ident()
    asked_on = []
    release_slow = threading.Event()  # the slow worker answers only when the test says so: no timing involved

    def slow_query(endpoint, timeout=10.0):
        asked_on.append(threading.get_ident())
        if endpoint.port == 50052:
            release_slow.wait(10)  # on the GUI thread this would hold the click below for 10 s
        return WorkerMemory(endpoint, free_bytes=1024**3, total_bytes=2 * 1024**3)

    monkeypatch.setattr(remote_workers, "query_memory", slow_query)
    panel.set_field_value(TWO_WORKERS)
    panel.test_button.click()
    assert not release_slow.is_set() and rows(panel)[0].endswith("testing…")  # the click returned at once
    # The quick worker's answer shows while the slow one is still being asked.
    qtbot.waitUntil(lambda: "lends" in rows(panel)[1], timeout=10000)
    assert rows(panel)[0].endswith("testing…") and not panel.test_button.isEnabled()
    release_slow.set()
    qtbot.waitUntil(lambda: "lends" in rows(panel)[0] and panel.test_button.isEnabled(), timeout=10000)
    assert len(asked_on) == 2 and gui_thread not in asked_on


def test_a_second_click_while_testing_starts_nothing(panel, qtbot, monkeypatch):
    calls = []

    def query(endpoint, timeout=10.0):
        calls.append(endpoint)
        time.sleep(0.1)
        return WorkerMemory(endpoint, error="refused the connection")

    monkeypatch.setattr(remote_workers, "query_memory", query)
    panel.set_field_value("127.0.0.1:50052")
    panel.test_connections()
    panel.test_connections()
    qtbot.waitUntil(panel.test_button.isEnabled, timeout=10000)
    assert len(calls) == 1


def test_closing_the_settings_while_testing_is_harmless(qtbot, monkeypatch):
    release, answered = threading.Event(), threading.Event()

    def query(endpoint, timeout=10.0):
        release.wait(10)
        answered.set()
        return WorkerMemory(endpoint, error="refused the connection")

    monkeypatch.setattr(remote_workers, "query_memory", query)
    dialog = SettingsDialog(ModelSettings(rpc="127.0.0.1:50052"), RunPreferences())
    dialog.remote_workers.test_button.click()
    dialog.deleteLater()
    qtbot.wait(10)  # deleted now, with the test still running: the close did not wait for it
    assert not answered.is_set()
    release.set()
    qtbot.waitUntil(answered.is_set, timeout=10000)
    qtbot.wait(50)  # the late answer reaches nobody, and raises nothing


# --- the status bar ----------------------------------------------------------------------------


@dataclass
class SplitInfo(FakeInfo):
    target_device: str = "CPU 10 layers + 2 RPC workers 9+9"
    target_backends: tuple[str, ...] = ("CPU", "RPC 127.0.0.1:50052", "RPC 127.0.0.1:50053")


def test_the_status_bar_names_the_backends_of_a_split_target(qtbot):
    bar = QStatusBar()
    qtbot.addWidget(bar)
    status = EngineStatus(bar)
    status.show_info(SplitInfo())
    assert status.device.text() == (
        "Draft: cpu · Target: CPU 10 layers + 2 RPC workers 9+9 "
        "(CPU, RPC 127.0.0.1:50052, RPC 127.0.0.1:50053) · context 32,768"
    )


@pytest.mark.parametrize("backends", [("CPU",), ()])
def test_a_single_backend_keeps_the_plain_text(backends):
    info = SplitInfo(target_device="CPU", target_backends=backends)
    assert devices_text(info) == "Draft: cpu · Target: CPU · context 32,768"


def test_the_start_hint_names_the_address_the_worker_must_bind(panel):
    """A worker binds 127.0.0.1 unless --host says otherwise: a hint without it starts one the app cannot reach."""
    from PySide6.QtWidgets import QLabel

    notes = [label.text() for label in panel.findChildren(QLabel) if "specprefill worker" in label.text()]
    assert len(notes) == 1 and "specprefill worker --host " in notes[0]
