#!/usr/bin/env bash
# bench/traces/record.py's five programs run live (not replayed) under PyTorch's allocator and
# gpumem's, one process per (program, configuration, repeat), one at a time (run.py):
#
#   torch-default       PyTorch's caching allocator
#   torch-expandable    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
#   gpumem-pool         gpumem's pool through libgpumem_torch.so (GPUMEM_ALLOCATOR=pool)
#   gpumem-async        gpumem's async (cudaMallocAsync pool)
#   gpumem-expandable   gpumem's expandable (virtual memory, grown in place)
#
#   bash bench/torch-live/run.sh
#   PROGRAMS=seed_gcn CONFIGS="torch-default gpumem-pool" REPEATS=1 bash bench/torch-live/run.sh
#
# For each program, each repeat runs every configuration in turn (so that drift over time spreads
# over all of them). Appends one JSON line per process to OUT/results.jsonl (summary.py record) and
# its output, under a header line, to OUT/runs.log (two files, whatever the grid: a GPU host may
# return only a few), then prints the table and one verdict line per program over everything in
# OUT/results.jsonl (summary.py table).
#
# Environment:
#   PROGRAMS          default "gpt2_finetune resnet50 graphsage seed_gcn gpt2_generate"
#   CONFIGS           default "torch-default torch-expandable gpumem-pool gpumem-async gpumem-expandable"
#   REPEATS           processes per program and configuration (default 3)
#   STEPS             steps per process (default 6; gpt2_generate: new tokens per prompt); the
#                     first WARMUP (default 2) are left out of the step times
#   OUT               default bench/torch-live/out (ignored by git)
#   RTOL              the loss tolerance, relative (default 1e-4)
#   RUN_TIMEOUT       seconds per process (default 300)
#   GPUMEM_TORCH_LIB  the library (default: the installed gpumem-torch wheel's, else the
#                     repository's native/build/Release/libgpumem_torch.so)
#   PYTHON            default python3 (needs torch with CUDA; transformers for the gpt2 programs,
#                     torchvision for resnet50)
# Exit status: the number of processes that failed (2 before any run for bad settings).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
python="${PYTHON:-python3}"
programs="${PROGRAMS:-gpt2_finetune resnet50 graphsage seed_gcn gpt2_generate}"
configs="${CONFIGS:-torch-default torch-expandable gpumem-pool gpumem-async gpumem-expandable}"
repeats="${REPEATS:-3}"
steps="${STEPS:-6}"
warmup="${WARMUP:-2}"
out="${OUT:-$here/out}"
rtol="${RTOL:-1e-4}"
run_timeout="${RUN_TIMEOUT:-300}"
programs="${programs//,/ }"
configs="${configs//,/ }"

fail() { echo "run.sh: $*" >&2; exit 2; }
case "$repeats" in '' | *[!0-9]* | 0) fail "REPEATS must be a positive integer (got '$repeats')" ;; esac
case "$run_timeout" in '' | *[!0-9]* | 0) fail "RUN_TIMEOUT must be a positive integer (got '$run_timeout')" ;; esac
[ -n "${programs// /}" ] && [ -n "${configs// /}" ] || fail "PROGRAMS and CONFIGS must name at least one each"
# run.py checks every name, STEPS and WARMUP (and prints the environment of each configuration).
uses_gpumem=0
for p in $programs; do
  for c in $configs; do
    "$python" "$here/run.py" --program "$p" --config "$c" --steps "$steps" --warmup "$warmup" --dry-run >/dev/null || exit 2
    case "$c" in gpumem-*) uses_gpumem=1 ;; esac
  done
done
"$python" -c "import sys; r = float(sys.argv[1]); sys.exit(0 if r >= 0 else 1)" "$rtol" 2>/dev/null \
  || fail "RTOL must be a number >= 0 (got '$rtol')"
if [ "$uses_gpumem" = 1 ]; then
  lib="$(GPUMEM_TORCH_LIB="${GPUMEM_TORCH_LIB:-}" "$python" "$here/run.py" --library)" || exit 2
  [ -f "$lib" ] || fail "$lib does not exist (install the gpumem-torch wheel, build native/, or set GPUMEM_TORCH_LIB)"
  export GPUMEM_TORCH_LIB="$lib"
fi
"$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' \
  || fail "$python needs PyTorch with a CUDA device"

mkdir -p "$out"
results="$out/results.jsonl"
log="$out/.process.log"  # one process's output, appended to runs.log after it
commit="${GPUMEM_COMMIT:-$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)}"
n_programs=$(wc -w <<<"$programs")
n_configs=$(wc -w <<<"$configs")
echo "commit $commit; library ${GPUMEM_TORCH_LIB:-none (no gpumem configuration)}" >&2
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv,noheader >&2 2>/dev/null || true
"$python" "$here/run.py" --estimate --programs "$programs" --config-list "$configs" --repeats "$repeats" \
  --steps "$steps" 2>/dev/null | tail -n1 | sed "s/^/estimate: /" >&2 || true

failed=0
grid_start="$(date +%s)"
for p in $programs; do
  for r in $(seq 1 "$repeats"); do
    for c in $configs; do
      header="== $p $c repeat $r/$repeats ($steps steps)"
      echo "$header" >&2
      start="$(date +%s.%N)"
      PYTHONUNBUFFERED=1 timeout "$run_timeout" "$python" "$here/run.py" --program "$p" --config "$c" \
        --repeat "$r" --steps "$steps" --warmup "$warmup" >"$log" 2>&1
      code=$?
      end="$(date +%s.%N)"
      wall="$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')"
      "$python" "$here/summary.py" record --log "$log" --exit "$code" --wall "$wall" --program "$p" --config "$c" \
        --repeat "$r" --steps "$steps" --warmup "$warmup" --commit "$commit" >>"$results"
      case $? in 0) ;; 1) failed=$((failed + 1)) ;; *) exit 2 ;; esac
      { echo "$header $(date -u +%FT%TZ) exit $code"; cat "$log"; } >>"$out/runs.log"
      rm -f "$log"
    done
  done
done
echo "$((n_programs * n_configs * repeats)) processes in $(($(date +%s) - grid_start)) s; $failed failed; results: $results" >&2
"$python" "$here/summary.py" table "$results" --rtol "$rtol"
exit "$failed"
