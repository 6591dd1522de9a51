#!/usr/bin/env bash
# Device call: the GPU suites after the seed graph drawn by rows, the staged exchange and axpy, and
# bench/multi at 2M nodes on one GPU again (setup peaks now recorded).
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
log="$out/summary.txt"
: > "$log"
export NCCL_NVLS_ENABLE=0
t=$(date +%s)
timeout 330 npm run test:gpu -- --exclude tests/report-browser.test.ts --exclude tests/guide.test.ts > "$out/test-gpu.log" 2>&1
echo "test:gpu exit $? after $(( $(date +%s) - t )) s" >> "$log"
grep -E "Test Files|Tests |vitest:|tests passed|FAIL|×|skipped:" "$out/test-gpu.log" | head -40 >> "$log"
t=$(date +%s)
timeout 200 node bench/multi/run.js --nodes 2000000 --epochs 4 --repeats 3 --timeout 60 \
  --config 'one device|pool|-' --config 'one NCCL rank|pool|1' --config 'two ranks sharing cuda:0|pool|0,0|host' \
  --json "$out/multi-2000000.json" > "$out/multi.log" 2>&1
echo "bench/multi exit $? after $(( $(date +%s) - t )) s" >> "$log"
cat "$out/multi.log" >> "$log"
cat "$log"
