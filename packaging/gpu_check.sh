#!/usr/bin/env bash
# The GPU path, checked on a machine with a CUDA GPU, in well under 8 minutes:
#   1. the tests that pretend devices, plus the ones that need a real CUDA GPU (skipped on CI);
#   2. `specprefill doctor --device cuda`: where each model runs, devices, free memory;
#   3. the draft's GPU memory (torch's allocator peak, and nvidia-smi's after) at 4K to 32K tokens;
#   4. `specprefill bench` at 8K and 32K tokens with the draft and the target on CUDA, as JSON;
#   5. one result file, $OUT/gpu-check.json: the card, each step's exit and seconds, and the above
#      (packaging/gpu_check_report.py).
# The steps share one 8-minute budget: each gets its own limit or what is left, whichever is less.
# Everything it writes goes under $OUT (default: ./gpu-check-out). Run from the repository root:
#   OUT=/tmp/gpu bash packaging/gpu_check.sh
# `--dry-run` prints each step's command instead of running it, and checks that the scripts and
# flags it names exist, with no GPU (the test suite runs it: tests/unit/test_gpu_check.py).
# The default models are used when `doctor` finds them verified; otherwise (a bare machine)
# a tiny random pair with a 32K window stands in, so the GPU path still runs end to end.
set -uo pipefail

OUT="${OUT:-$PWD/gpu-check-out}"
PY="${PYTHON:-.venv/bin/python}"
DOC="${DOC:-resources/samples/docs/R-intro.pdf}"  # ~100 pages; bench repeats a text shorter than a length
LENGTHS="${LENGTHS:-8192,32768}"
DRY=0
[[ "${1:-}" == "--dry-run" ]] && DRY=1
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 QT_QPA_PLATFORM=offscreen
BUDGET_S="${BUDGET_S:-470}"  # the whole check, the report included, stays under 8 minutes
mkdir -p "$OUT"
: > "$OUT/steps.tsv"
failed=()

step() {  # step NAME SECONDS COMMAND...: run with a time limit, keep going, remember failures
    local name=$1 limit=$2 left=$((BUDGET_S - SECONDS)) started=$SECONDS rc
    shift 2
    ((limit > left)) && limit=$left
    echo "== $name" >&2  # stderr: a step's stdout may be its JSON
    if [[ $DRY -eq 1 ]]; then
        printf 'would run (%ss):' "$limit" >&2
        printf ' %s' "$@" >&2
        echo >&2
        rc=dry
    elif ((limit <= 0)); then
        rc=124  # timeout's own status: the budget ran out before this step
    else
        timeout "$limit" "$@"
        rc=$?
    fi
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$limit" "$rc" "$((SECONDS - started))" "$*" >> "$OUT/steps.tsv"
    [[ $rc == dry ]] && return 0
    echo "== $name: exit $rc" >&2
    [[ $rc -eq 0 ]] || failed+=("$name (exit $rc)")
    return $rc
}

if [[ $DRY -eq 1 ]]; then
    for path in tests/unit/test_device_placement.py tests/unit/test_doctor.py research/gpu/draft_memory.py "$DOC"; do
        [[ -e "$path" ]] || { echo "gpu_check: $path is missing" >&2; exit 1; }
    done
    "$PY" -P research/gpu/draft_memory.py --help > /dev/null || exit 1
    "$PY" -P -m engine.cli bench --help | grep -q -- "--device" || exit 1
elif ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    echo "gpu_check: torch sees no CUDA device (a CPU torch build?); set up with 'make setup GPU=cuda'" >&2
    exit 1
fi
if [[ $DRY -eq 0 ]] && command -v nvidia-smi >/dev/null; then
    nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$OUT/gpu.csv" 2>&1
fi
echo "the default models" > "$OUT/models.txt"

step "device tests" 150 "$PY" -m pytest -q -rs -p no:cacheprovider --junitxml="$OUT/device-tests.xml" \
    tests/unit/test_device_placement.py tests/unit/test_doctor.py

models=()
if ! step "doctor" 60 "$PY" -m engine.cli doctor --device cuda > "$OUT/doctor.txt"; then
    tiny="$(mktemp -d)"
    echo "== default models not ready: benching a tiny random pair in $tiny instead" >&2
    "$PY" -c 'import sys
from tests.fixtures.tiny_gguf import write_tiny_qwen2_gguf as write
for role, seed in (("target", 1), ("draft", 2)):
    write(f"{sys.argv[1]}/tiny-{role}.gguf", seed=seed, name=f"tiny-{role}", n_ctx=32768)' "$tiny"
    models=(--target "$tiny/tiny-target.gguf" --draft "$tiny/tiny-draft.gguf")
    echo "a tiny random pair with a 32K window (the default models were not ready here)" > "$OUT/models.txt"
    step "doctor (tiny pair)" 60 "$PY" -m engine.cli doctor --device cuda ${models[@]+"${models[@]}"} > "$OUT/doctor.txt"
fi
cat "$OUT/doctor.txt"

step "draft memory" 120 "$PY" -P research/gpu/draft_memory.py --json "$OUT/draft-memory.json"

step "bench on cuda" 240 "$PY" -m engine.cli bench --device cuda --doc "$DOC" --lengths "$LENGTHS" --json \
    ${models[@]+"${models[@]}"} > "$OUT/bench-cuda.json" 2> "$OUT/bench-cuda.stderr"
tail -n 5 "$OUT/bench-cuda.stderr"

report=("$PY" -P packaging/gpu_check_report.py "$OUT")
[[ $DRY -eq 1 ]] && report+=(--dry-run)
"${report[@]}" || failed+=("report")

if [[ ${#failed[@]} -gt 0 ]]; then
    printf 'gpu_check: FAILED: %s\n' "${failed[@]}" >&2
    exit 1
fi
if [[ $DRY -eq 1 ]]; then
    echo "gpu_check: dry run: the commands above are what a GPU machine runs"
else
    echo "gpu_check: all passed; results in $OUT/gpu-check.json"
fi
