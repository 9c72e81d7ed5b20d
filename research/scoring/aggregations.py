"""Offline: other ways of reducing the draft's look-ahead attention to chunk scores, compared on
whether the answer's text (or each summary key point) would be kept.

Input: the rows of `keep-auto-probe.py OUT.jsonl --heads DIR` (evidence chunks, protected chunks,
kinds) and DIR/ID.npz (per step, layer*head and chunk: means and maxima of the smoothed rows).
Usage: python research/scoring/aggregations.py ROWS.jsonl DIR [--json RESULT.json]

A place where an answer occurs counts as kept when at least half of its chunks are kept (the probe
asks for half of its tokens); a point counts when one of its places is; a case scores the share of
its points kept. The selection is select_chunks' without coverage: the protected chunks, then the
free chunks by score, ceil(keep * n_chunks) in all.
"""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np

KEEPS = (0.1, 0.2, 0.3)
LOCAL_SHARE = 0.05  # a head is "local" when it puts most of its mass on this last share of chunks


def reference(case):
    """The engine's: max over layers x heads per token, mean over steps, then chunk means."""
    return case["chunk_scores"]


def max_of_chunk_means(case, rows=slice(None)):
    return case["chunk_mean"][:, rows].max(axis=1).mean(axis=0)


def mean_of_rows(case):
    return case["chunk_mean"].mean(axis=1).mean(axis=0)


def top_rows_mean(case, k):
    ranked = np.sort(case["chunk_mean"], axis=1)[:, -k:]
    return ranked.mean(axis=1).mean(axis=0)


def from_layer(case, first):
    return max_of_chunk_means(case, slice(first * case["heads"], None))


def rank_normalized(case):
    """Each row's chunks as percentiles within that row, so no head wins by its scale alone."""
    cm = case["chunk_mean"]
    ranks = cm.argsort(axis=-1).argsort(axis=-1) / max(cm.shape[-1] - 1, 1)
    return ranks.max(axis=1).mean(axis=0)


def without_local_heads(case):
    """Max over the rows that do not put most of their mass on the chunks just before the end."""
    cm = case["chunk_mean"]
    n_last = max(1, math.ceil(LOCAL_SHARE * cm.shape[-1]))
    local = cm[..., -n_last:].sum(-1) > 0.5 * cm.sum(-1)
    masked = np.where(local[..., None], -np.inf, cm)
    return masked.max(axis=1).mean(axis=0)


def look_ahead_only(case):
    """Steps after the last prompt token only (the draft's own answer tokens)."""
    cm = case["chunk_mean"]
    return cm[1:].max(axis=1).mean(axis=0) if cm.shape[0] > 1 else cm.max(axis=1).mean(axis=0)


def chunk_maxima(case):
    return case["chunk_max"].max(axis=1).mean(axis=0)


def over_document_prior(case):
    """The reference divided by what the document's other questions gave each chunk (leave one out):
    a chunk every question attends to (the text just before the question, headings) stands out less."""
    scores, prior = case["chunk_scores"].copy(), case.get("doc_prior")
    if prior is None:
        return scores
    n = min(len(prior), len(scores))
    scores[:n] = scores[:n] / np.maximum(prior[:n], 1e-12)
    return scores


def local_contrast(case, width=31):
    """The reference divided by its own running median over `width` chunks: what stands out from
    its neighbourhood, whatever the neighbourhood's level (the end of the prompt is high for all)."""
    scores = case["chunk_scores"]
    half = width // 2
    padded = np.pad(scores, half, mode="edge")
    windows = np.lib.stride_tricks.sliding_window_view(padded, width)
    return scores / np.maximum(np.median(windows, axis=1), 1e-12)


AGGREGATIONS = {
    "reference": reference,
    "max of chunk means": max_of_chunk_means,
    "mean of rows": mean_of_rows,
    "top-8 rows": lambda c: top_rows_mean(c, 8),
    "top-32 rows": lambda c: top_rows_mean(c, 32),
    "layers 4+": lambda c: from_layer(c, 4),
    "layers 8+": lambda c: from_layer(c, 8),
    "layers 12+": lambda c: from_layer(c, 12),
    "layers 16+": lambda c: from_layer(c, 16),
    "rank-normalized": rank_normalized,
    "no local heads": without_local_heads,
    "look-ahead only": look_ahead_only,
    "chunk maxima": chunk_maxima,
    "over document prior": over_document_prior,
    "local contrast": local_contrast,
}


def free_ranks(scores, protected):
    """Rank of each free chunk by score (0 = best; ties to the earlier chunk), -1 for protected."""
    ranks = np.full(len(scores), -1)
    free = [i for i in np.argsort(-np.asarray(scores), kind="stable") if i not in protected]
    ranks[free] = np.arange(len(free))
    return ranks


def place_kept(place, ranks, budget_free):
    kept = sum(1 for c in place if ranks[c] < budget_free)  # protected chunks have rank -1
    return kept >= math.ceil(len(place) / 2)


def case_score(case, scores, keep):
    n = len(scores)
    protected = set(case["protected"])
    budget_free = max(math.ceil(keep * n), len(protected)) - len(protected)
    ranks = free_ranks(scores, protected)
    points = [any(place_kept(pl, ranks, budget_free) for pl in places) for places in case["evidence"]]
    return sum(points) / len(points)


def load_cases(rows_path: Path, heads_dir: Path):
    for line in rows_path.read_text().splitlines():
        row = json.loads(line)
        npz = heads_dir / f"{row['id']}.npz"
        if not npz.exists() or not row.get("evidence") or not any(row["evidence"]):
            continue
        data = np.load(npz)
        yield dict(
            row,
            chunk_mean=data["chunk_mean"].astype(np.float32),
            chunk_max=data["chunk_max"].astype(np.float32),
            heads=int(data["heads"]),
            chunk_scores=np.asarray(row["chunk_scores"]),
        )


def add_document_priors(cases):
    """Each case gets the mean reference scores of its document's other cases, over the chunks they
    share (the document's; questions differ in length), when the document has other cases."""
    by_doc = defaultdict(list)
    for case in cases:
        by_doc[case.get("doc", case["id"])].append(case)
    for group in by_doc.values():
        for case in group:
            others = [c["chunk_scores"] for c in group if c is not case]
            if others:
                n = min(map(len, others)) - 1  # the last chunk holds the question's start
                case["doc_prior"] = np.mean([o[:n] for o in others], axis=0)
    return cases


def evaluate(cases, aggregations=None, baseline=reference):
    """{aggregation: {kind or "all": {keep: mean score}}}; the number of cases per kind; and per
    aggregation, how many cases it scores above and below the baseline at each keep (paired)."""
    table = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    paired = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for case in cases:
        reference_scores = {keep: case_score(case, baseline(case), keep) for keep in KEEPS}
        for name, aggregate in (aggregations or AGGREGATIONS).items():
            scores = aggregate(case)
            for keep in KEEPS:
                s = case_score(case, scores, keep)
                table[name][case["kind"]][keep].append(s)
                table[name]["all"][keep].append(s)
                paired[name][str(keep)][0] += s > reference_scores[keep]
                paired[name][str(keep)][1] += s < reference_scores[keep]
    means = {
        name: {
            kind: {str(k): round(float(np.mean(v)), 3) for k, v in by_keep.items()}
            for kind, by_keep in by_kind.items()
        }
        for name, by_kind in table.items()
    }
    counts = {kind: len(v[KEEPS[0]]) for kind, v in next(iter(table.values())).items()}
    return means, counts, {name: dict(by_keep) for name, by_keep in paired.items()}


def print_table(result, counts, paired):
    kinds = sorted(counts, key=lambda k: (k != "all", k))
    print("answer text kept, by aggregation (rows) and kind (columns), at keep " + "/".join(map(str, KEEPS)))
    print(
        "".ljust(20)
        + "".join(f"{k} ({counts[k]})".ljust(20) for k in kinds)
        + "cases above/below the reference"
    )
    for name, by_kind in result.items():
        cells = ["/".join(f"{by_kind[k][str(keep)]:.2f}" for keep in KEEPS) for k in kinds]
        versus = " ".join(f"+{up}-{down}" for up, down in paired[name].values())
        print(name.ljust(20) + "".join(c.ljust(20) for c in cells) + versus)


def print_and_save(evaluated, json_path: Path | None):
    """Print evaluate()'s result as a table, and write it as JSON to json_path where given."""
    result, counts, paired = evaluated
    print_table(result, counts, paired)
    if json_path is not None:
        json_path.write_text(
            json.dumps({"cases": counts, "kept": result, "above_below_reference": paired}, indent=1)
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rows", type=Path, help="`keep-auto-probe.py OUT.jsonl --heads DIR`'s rows")
    parser.add_argument("heads_dir", type=Path, metavar="DIR", help="its DIR/ID.npz")
    parser.add_argument("--json", type=Path, metavar="RESULT.json")
    args = parser.parse_args(argv)
    print_and_save(evaluate(add_document_priors(list(load_cases(args.rows, args.heads_dir)))), args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
