#!/usr/bin/env bash
# Device call: the multi-device suites after the launcher fix, compare over ranks sharing the GPU,
# and the mlp's captured step with and without the data-parallel all-reduce (one NCCL rank).
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
log="$out/summary.txt"
: > "$log"
export NCCL_NVLS_ENABLE=0
t=$(date +%s)
GPUMEM_REQUIRE_GPU=1 timeout 200 npx vitest run tests/distributed-gpu.test.ts packages/distributed packages/gnn/src/train-distributed.test.ts \
  tests/peer-access.test.ts packages/allocator-core/src/topology.test.ts packages/cli/src/compare-devices.test.ts > "$out/test-gpu.log" 2>&1
echo "multi-device suites exit $? after $(( $(date +%s) - t )) s" >> "$log"
grep -E "Test Files|Tests |vitest:|FAIL|×" "$out/test-gpu.log" | head -30 >> "$log"
t=$(date +%s)
timeout 150 node packages/cli/dist/cli.js compare --model gcn --nodes 500000 --epochs 3 --devices 0,0 --communicator host \
  --allocators pool,async --json "$out/compare-devices.json" --report "$out/compare-devices.html" > "$out/compare.log" 2>&1
echo "compare --devices 0,0 exit $? after $(( $(date +%s) - t )) s" >> "$log"
tail -20 "$out/compare.log" >> "$log"
for i in 1 2; do
  for mode in plain ranked; do
    extra=""; [ "$mode" = ranked ] && extra="--devices 1"
    timeout 100 node packages/cli/dist/cli.js train --model mlp --allocator pool --cuda-graph --epochs 3 $extra > "$out/mlp.log" 2>&1
    echo "mlp --cuda-graph $mode run $i exit $?:" >> "$log"
    grep -E "^[0-9]+ " "$out/mlp.log" | head -3 >> "$log"
  done
done
cat "$log"
