#!/usr/bin/env bash
# Device call: the GPU suites and the fragmentation traces again after the pool/expandable
# bookkeeping was shared (the device path of expandable goes through it).
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
log="$out/summary.txt"
git log --oneline -1 > "$log" 2>/dev/null || true
t=$(date +%s)
timeout 240 npm run test:gpu -- --exclude tests/report-browser.test.ts --exclude tests/guide.test.ts > "$out/test-gpu.log" 2>&1
echo "test:gpu exit $? after $(( $(date +%s) - t )) s" >> "$log"
t=$(date +%s)
timeout 150 npm run test:torch >> "$out/test-gpu.log" 2>&1
echo "test:torch exit $? after $(( $(date +%s) - t )) s" >> "$log"
t=$(date +%s)
timeout 100 node bench/fragmentation/run.js --repeats 3 --out "$out/fragmentation.json" > "$out/fragmentation.log" 2>&1
echo "fragmentation exit $? after $(( $(date +%s) - t )) s" >> "$log"
grep -E "Test Files|Tests |vitest:|tests passed|^Ran |^OK|FAILED|×" "$out/test-gpu.log" >> "$log"
cat "$log"
