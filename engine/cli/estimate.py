"""`specprefill estimate`: predicted baseline and SpecPrefill TTFT from this machine's calibration."""

from __future__ import annotations

import argparse
import json

from engine.api.maintenance import require_cost_model
from engine.cli.options import add_settings_options
from engine.core.cancel import CancelToken
from engine.core.settings import RunSettings, nominal_keep


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("estimate", help="predict baseline and SpecPrefill TTFT from the calibration")
    p.add_argument("--tokens", type=int, required=True, help="the prompt length in tokens to predict for")
    add_settings_options(p, RunSettings, only=("keep", "draft_window", "max_new_tokens", "lookahead"))
    p.add_argument("--json", action="store_true", help="print the prediction as one JSON object")
    p.set_defaults(command=command)
    return p


def command(args: argparse.Namespace, cancel: CancelToken) -> int:
    model = require_cost_model()
    # keep auto is predicted at the keep it is expected to choose (the cost model needs a number)
    estimate = model.estimate(
        args.tokens,
        nominal_keep(args.keep),
        args.draft_window,
        *model.window_limits(args.max_new_tokens, args.lookahead),
    )
    if args.json:
        print(json.dumps(estimate, indent=2))
        return 0
    window = f"draft window {args.draft_window}" if args.draft_window else "full draft attention"
    longer = "" if estimate["fits"] else " (longer than the window: the baseline is the cut full prefill)"
    print(
        f"{args.tokens} tokens, keep {args.keep}, {window}: baseline {estimate['baseline_ttft_s']:.1f}s{longer}, "
        f"SpecPrefill {estimate['spec_ttft_s']:.1f}s (draft {estimate['draft_s']:.1f}s + target "
        f"{estimate['target_prefill_s']:.1f}s, {estimate['kept_tokens']} tokens), speed-up {estimate['speedup']:.2f}x"
    )
    return 0
