#!/usr/bin/env bash
# The seed's UVM benchmark script (workloads/pytorch/benchmark_gnn_uvm.py of eunomia-bpf/schedcp),
# unmodified, with libgpumem_torch.so copied beside it as uvm_allocator.so (the seed's file name and
# uvm_* symbols), under gpumem's 'tiered' strategy and under 'uvm' without a cap:
#
#   1. time:   epoch times at NODES (default 4.7M: 104.5 GB of tensors on an 80 GB H100, the seed's
#              1.32x oversubscription), tiered then uvm, one process at a time, in the same call;
#   2. search: the largest --nodes each strategy trains while the host memory it takes (MemTotal -
#              MemAvailable, sampled every 0.5 s, above what was in use before the run) stays within
#              HOST_LIMIT_GIB (default 125).
#
#   bash bench/torch-tiered/run.sh SEED_SCRIPT [OUT_DIR]
#
# SEED_SCRIPT is a local copy of benchmark_gnn_uvm.py: nothing is fetched at run time. It is copied
# into OUT_DIR/work/ (its result/ folder is written there) beside the library; it is never edited.
#
# Environment:
#   PART              time | search | all (default all)
#   ALLOCATORS        default "tiered uvm"
#   NODES             default 4700000 (time)          EPOCHS  default 3, WARMUP 1 (time)
#   SEARCH_NODES      ascending node counts tried (search; default 4700000 6000000 8000000
#                     10000000 12000000 14000000 16000000 20000000); a strategy stops at its first
#                     failure or first run over HOST_LIMIT_GIB
#   SEARCH_EPOCHS     default 1 (after 1 warm-up epoch)
#   HOST_LIMIT_GIB    default 125; tiered is also told GPUMEM_TIERED_HOST_BUDGET=<that> so that it
#                     never pins more (and never more than the host can spare: the library's own cap)
#   OVERSUBSCRIBE=1   required for 'uvm': it runs with GPUMEM_UVM_LIMIT=none, i.e. managed memory past
#                     the device's free memory, which the GPU rules allow only in this explicitly
#                     oversubscribing run. Without it the uvm runs are skipped.
#   RUN_TIMEOUT       seconds per run (default 3600)
#   GPUMEM_TORCH_LIB  the library (default: the installed gpumem_torch package's, else the
#                     repository's native/build/Release/libgpumem_torch.so)
#   PYTHON            default python3 (needs torch and psutil, as the seed script does)
#
# Appends to OUT_DIR/results.jsonl (so that PART=time and PART=search can run as two calls): one line per run {part, allocator, nodes, ok, exit, epoch_times_s,
# median_epoch_s, first_epoch_s, host_used_peak_bytes, report}; logs as OUT_DIR/<part>-<allocator>-<nodes>.log;
# and prints a table.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
seed="${1:?usage: run.sh SEED_SCRIPT [OUT_DIR]  (SEED_SCRIPT: a local copy of benchmark_gnn_uvm.py)}"
out="${2:-$repo/bench/torch-tiered/out}"
python="${PYTHON:-python3}"
part="${PART:-all}"
allocators="${ALLOCATORS:-tiered uvm}"
nodes="${NODES:-4700000}"
epochs="${EPOCHS:-3}"
warmup="${WARMUP:-1}"
search_nodes="${SEARCH_NODES:-4700000 6000000 8000000 10000000 12000000 14000000 16000000 20000000}"
search_epochs="${SEARCH_EPOCHS:-1}"
host_limit_gib="${HOST_LIMIT_GIB:-125}"
run_timeout="${RUN_TIMEOUT:-3600}"

[ -f "$seed" ] || { echo "run.sh: $seed is not a file" >&2; exit 2; }
case "$part" in time|search|all) ;; *) echo "run.sh: PART must be time, search or all (got $part)" >&2; exit 2 ;; esac
lib="${GPUMEM_TORCH_LIB:-}"
if [ -z "$lib" ]; then
  lib="$(PYTHONPATH="$repo/bindings/python" "$python" -c 'import gpumem_torch; print(gpumem_torch.library_path())')" || exit 2
fi
[ -f "$lib" ] || { echo "run.sh: $lib does not exist (install the gpumem-torch wheel or set GPUMEM_TORCH_LIB)" >&2; exit 2; }
"$python" -c 'import torch, psutil' || { echo "run.sh: $python needs torch and psutil (the seed script imports both)" >&2; exit 2; }

mkdir -p "$out/work"
cp "$seed" "$out/work/benchmark_gnn_uvm.py"
cp "$lib" "$out/work/uvm_allocator.so"
results="$out/results.jsonl"
[ -f "$results" ] || : >"$results"
limit_bytes=$((host_limit_gib * 1024 * 1024 * 1024))
echo "seed script: $seed (sha256 $(sha256sum "$seed" | cut -c1-16)); library: $lib" >&2
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv,noheader >&2 || true

mem_available() { echo $(( $(awk '/^MemAvailable:/ {print $2}' /proc/meminfo) * 1024 )); }

# run PART ALLOCATOR NODES EPOCHS: one process; appends a JSON line; returns 0 when it trained
# within the host limit.
run() {
  local tag="$1" alloc="$2" n="$3" ep="$4"
  local log="$out/$tag-$alloc-$n.log" report="$out/$tag-$alloc-$n.json"
  local -a vars=(GPUMEM_ALLOCATOR="$alloc" PYTHONUNBUFFERED=1)
  case "$alloc" in
    uvm)
      if [ "${OVERSUBSCRIBE:-0}" != 1 ]; then
        echo "   skipped: uvm without a cap oversubscribes the device; set OVERSUBSCRIBE=1 to run it" >&2
        return 1
      fi
      vars+=(GPUMEM_UVM_LIMIT=none) ;;
    tiered) vars+=(GPUMEM_TIERED_HOST_BUDGET="${host_limit_gib}GiB") ;;
  esac
  local before sample_file sampler
  before="$(mem_available)"
  sample_file="$(mktemp)"
  echo "$before" >"$sample_file"
  ( min="$before"; while :; do a="$(mem_available)"; [ "$a" -lt "$min" ] && min="$a" && echo "$min" >"$sample_file"; sleep 0.5; done ) &
  sampler=$!
  echo "== $tag $alloc nodes=$n epochs=$ep" >&2
  local start end code
  start="$(date +%s.%N)"
  (cd "$out/work" && env "${vars[@]}" timeout "$run_timeout" "$python" benchmark_gnn_uvm.py --dataset random \
      --nodes "$n" --epochs "$ep" --warmup "$warmup" --use_uvm --report_json "$report") >"$log" 2>&1
  code=$?
  end="$(date +%s.%N)"
  kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
  local min_avail; min_avail="$(cat "$sample_file" 2>/dev/null || echo "$before")"; rm -f "$sample_file"
  local used=$((before - min_avail))
  "$python" - "$tag" "$alloc" "$n" "$code" "$used" "$report" "$start" "$end" "$limit_bytes" >>"$results" <<'PY'
import json, os, statistics, sys
tag, alloc, n, code, used, report, start, end, limit = sys.argv[1:]
rep = json.load(open(report)) if os.path.exists(report) else None
times = rep["epoch_times_s"] if rep else []
print(json.dumps({
    "part": tag, "allocator": alloc, "nodes": int(n), "ok": int(code) == 0 and rep is not None, "exit": int(code),
    "epoch_times_s": times, "median_epoch_s": statistics.median(times) if times else None,
    "first_epoch_s": times[0] if times else None, "wall_s": round(float(end) - float(start), 1),
    "host_used_peak_bytes": int(used), "within_host_limit": int(used) <= int(limit),
    "uvm_stats": rep.get("uvm_stats") if rep else None, "report": report if rep else None,
}))
PY
  tail -n1 "$results" | sed 's/^/   /' >&2
  [ "$code" -eq 0 ] && [ "$used" -le "$limit_bytes" ]
}

if [ "$part" = time ] || [ "$part" = all ]; then
  for a in $allocators; do run time "$a" "$nodes" "$epochs"; done
fi
if [ "$part" = search ] || [ "$part" = all ]; then
  for a in $allocators; do
    for n in $search_nodes; do
      run search "$a" "$n" "$search_epochs" || break
    done
  done
fi

"$python" - "$results" "$host_limit_gib" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print(f"{'part':7} {'allocator':9} {'nodes':>10} {'ok':3} {'median s':>9} {'first s':>8} {'host GiB':>9}")
for r in rows:
    med = f"{r['median_epoch_s']:.3f}" if r["median_epoch_s"] is not None else "-"
    first = f"{r['first_epoch_s']:.3f}" if r["first_epoch_s"] is not None else "-"
    print(f"{r['part']:7} {r['allocator']:9} {r['nodes']:>10} {'yes' if r['ok'] else 'no':3} {med:>9} {first:>8} {r['host_used_peak_bytes'] / 2**30:>9.1f}")
for a in sorted({r["allocator"] for r in rows}):
    fit = [r["nodes"] for r in rows if r["part"] == "search" and r["allocator"] == a and r["ok"] and r["within_host_limit"]]
    print(f"largest --nodes trained by {a} within {sys.argv[2]} GiB of host memory: {max(fit) if fit else 'none measured'}")
PY
