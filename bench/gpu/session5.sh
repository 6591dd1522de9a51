#!/usr/bin/env bash
# Device call: after the pinned and tiered strategies, the row-block GCN plan and the mlp's
# checkpointing: the GPU suites, the PyTorch tests, the host-link benchmark and the checkpointing
# benchmark (pool; uvm with and without trainer-inserted prefetch).
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
log="$out/summary.txt"
: > "$log"
t=$(date +%s)
timeout 260 npm run test:gpu -- --exclude tests/report-browser.test.ts --exclude tests/guide.test.ts > "$out/test-gpu.log" 2>&1
echo "test:gpu exit $? after $(( $(date +%s) - t )) s" >> "$log"
t=$(date +%s)
timeout 100 npm run test:torch >> "$out/test-gpu.log" 2>&1
echo "test:torch exit $? after $(( $(date +%s) - t )) s" >> "$log"
t=$(date +%s)
timeout 90 node bench/link/run.js --json "$out/link.json" > "$out/bench.log" 2>&1
echo "link exit $? after $(( $(date +%s) - t )) s" >> "$log"
t=$(date +%s)
timeout 90 node bench/checkpoint/run.js --json "$out/checkpoint-pool.json" >> "$out/bench.log" 2>&1
echo "checkpoint pool exit $? after $(( $(date +%s) - t )) s" >> "$log"
for variant in "uvm" "uvm --layer-prefetch"; do
  t=$(date +%s)
  timeout 60 node bench/checkpoint/run.js --allocator ${variant} --checkpoints off,2 --nano-batches 1 --json "$out/checkpoint-${variant// /}.json" >> "$out/bench.log" 2>&1
  echo "checkpoint ${variant} exit $? after $(( $(date +%s) - t )) s" >> "$log"
done
grep -E "Test Files|Tests |vitest:|tests passed|^Ran |^OK|FAILED|×|ctest|% tests" "$out/test-gpu.log" >> "$log"
cat "$log"
