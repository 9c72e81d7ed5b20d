"""`specprefill cache list|clear`: the documents' saved prefix states (engine.pipeline.state_store)."""

from __future__ import annotations

import argparse
import json
import time

from engine.api import printable
from engine.api.maintenance import SavedState, StateStore, cap_bytes
from engine.cli.options import add_settings_options, model_settings_from
from engine.core.cancel import CancelToken
from engine.core.paths import state_cache_dir
from engine.core.settings import ModelSettings

MB, GB = 1e6, 1e9


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("cache", help="list or clear the documents' saved prefix states")
    p.add_argument("action", choices=("list", "clear"), help="list the saved states, or remove them all")
    p.add_argument(
        "--json", action="store_true", help="list: one JSON object with every state and the totals"
    )
    add_settings_options(p, ModelSettings, only=("state_cache_gb",))
    p.set_defaults(command=command)
    return p


def command(args: argparse.Namespace, cancel: CancelToken) -> int:
    store = StateStore(state_cache_dir(), cap_bytes(model_settings_from(args).state_cache_gb))
    if args.action == "clear":
        count, freed = store.clear()
        print(f"removed {_states(count)} ({_size(freed)})")
        return 0
    entries = store.entries()
    print(json.dumps(listing_json(store, entries)) if args.json else listing_text(store, entries))
    return 0


def listing_json(store: StateStore, entries: list[SavedState]) -> dict:
    return {
        "folder": str(store.folder),
        "cap_bytes": store.cap,
        "total_bytes": sum(e.state_bytes for e in entries),
        "states": [
            dict(
                document_sha256=e.document_sha256,
                target=e.target_name,
                tokens=e.prefix_tokens,
                bytes=e.state_bytes,
                created=e.created,
                last_used=e.last_used,
            )
            for e in entries
        ],
    }


def listing_text(store: StateStore, entries: list[SavedState]) -> str:
    """One line per state, most recently used first, then the total against the cap. A sidecar may
    come from elsewhere: its text is shown without control characters."""
    lines = [
        f"{printable(e.document_sha256[:12])}  {e.prefix_tokens:>7} tokens  {_size(e.state_bytes):>9}  "
        f"used {_when(e.last_used)}  {printable(e.target_name)}"
        for e in entries
    ]
    cap = _size(store.cap) if store.enabled else "0 (saved states are off)"
    lines.append(
        f"{_states(len(entries))}, {_size(sum(e.state_bytes for e in entries))} of {cap} "
        f"in {printable(str(store.folder))}"
    )
    return "\n".join(lines)


def _states(count: int) -> str:
    return f"{count} saved state{'' if count == 1 else 's'}"


def _size(n_bytes: int) -> str:
    return f"{n_bytes / GB:.2f} GB" if n_bytes >= GB else f"{n_bytes / MB:.1f} MB"


def _when(timestamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(timestamp))
