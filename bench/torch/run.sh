#!/usr/bin/env bash
# The seed GCN (examples/torch/gcn_benchmark.py) under PyTorch's caching allocator and gpumem's
# strategies, one process each, in one go on one GPU. Writes one JSON line per allocator.
#
#   bash bench/torch/run.sh [OUT.jsonl]
#
# Environment: NODES (default 2000000), EPOCHS (10), ALLOCATORS ("torch pool async uvm"; add
# cuda for cudaMalloc per tensor), GPUMEM_TORCH_LIB (default native/build/Release/libgpumem_torch.so),
# PYTHON (python3). Logs go beside OUT as OUT-<allocator>.log.
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${1:-bench/torch/out/results.jsonl}"
nodes="${NODES:-2000000}"
epochs="${EPOCHS:-10}"
allocators="${ALLOCATORS:-torch pool async uvm}"
python="${PYTHON:-python3}"
mkdir -p "$(dirname "$out")"
: >"$out"
status=0
for a in $allocators; do
  log="${out%.jsonl}-$a.log"
  echo "== $a ($nodes nodes, $epochs epochs)" >&2
  if PYTHONUNBUFFERED=1 "$python" examples/torch/gcn_benchmark.py --allocator "$a" --nodes "$nodes" \
      --epochs "$epochs" >"$log" 2>&1; then
    grep '^RESULT ' "$log" | sed 's/^RESULT //' >>"$out"
  else
    echo "   $a failed (exit $?), see $log" >&2
    status=1
  fi
  grep -E '^(time per epoch|peak)' "$log" | sed 's/^/   /' >&2 || true
done
echo "wrote $out" >&2
exit $status
