#!/usr/bin/env bash
# Device call: the GPU suites and the PyTorch tests on the final code of the multi-device work.
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
log="$out/summary.txt"
: > "$log"
export NCCL_NVLS_ENABLE=0
t=$(date +%s)
timeout 330 npm run test:gpu -- --exclude tests/report-browser.test.ts --exclude tests/guide.test.ts > "$out/test-gpu.log" 2>&1
echo "test:gpu exit $? after $(( $(date +%s) - t )) s" >> "$log"
t=$(date +%s)
timeout 200 npm run test:torch >> "$out/test-gpu.log" 2>&1
echo "test:torch exit $? after $(( $(date +%s) - t )) s" >> "$log"
grep -E "Test Files|Tests |vitest:|tests passed|^Ran |^OK|FAILED|FAIL|×|skipped:" "$out/test-gpu.log" | head -60 >> "$log"
cat "$log"
