#!/usr/bin/env bash
# Device call A: GPU tests (vitest with the device required, ctest on CUDA, the PyTorch tests),
# three `npm start` runs (each allocator 3 times, interleaved), gcn-seed 2M under compare.
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
log="$out/summary.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv > "$log" 2>&1
t=$(date +%s)
timeout 240 npm run test:gpu -- --exclude tests/report-browser.test.ts --exclude tests/guide.test.ts > "$out/test-gpu.log" 2>&1
echo "test:gpu exit $? after $(( $(date +%s) - t )) s" >> "$log"
t=$(date +%s)
timeout 150 npm run test:torch >> "$out/test-gpu.log" 2>&1
echo "test:torch exit $? after $(( $(date +%s) - t )) s" >> "$log"
for i in 1 2 3; do
  t=$(date +%s)
  timeout 70 npm start >> "$out/bench.log" 2>&1
  echo "npm start $i exit $? after $(( $(date +%s) - t )) s" >> "$log"
  gzip -c gpumem-compare.json > "$out/start-$i.json.gz" 2>/dev/null
done
t=$(date +%s)
timeout 60 node packages/cli/dist/cli.js compare --model gcn --nodes 2000000 --allocators pool,async,cuda,expandable --epochs 3 \
  --json "$out/gcn2m.json" >> "$out/bench.log" 2>&1
echo "gcn compare exit $? after $(( $(date +%s) - t )) s" >> "$log"
grep -E "Test Files|Tests |vitest:|tests passed|^Ran |^OK|FAILED|×" "$out/test-gpu.log" >> "$log"
cat "$log"
