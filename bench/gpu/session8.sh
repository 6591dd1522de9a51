#!/usr/bin/env bash
# Device call: the GPU suites and the PyTorch tests after the last changes.
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
log="$out/summary.txt"
: > "$log"
t=$(date +%s)
timeout 260 npm run test:gpu -- --exclude tests/report-browser.test.ts --exclude tests/guide.test.ts > "$out/test-gpu.log" 2>&1
echo "test:gpu exit $? after $(( $(date +%s) - t )) s" >> "$log"
t=$(date +%s)
timeout 240 npm run test:torch >> "$out/test-gpu.log" 2>&1
echo "test:torch exit $? after $(( $(date +%s) - t )) s" >> "$log"
grep -E "Test Files|Tests |vitest:|tests passed|^Ran |^OK|FAILED|×|% tests" "$out/test-gpu.log" >> "$log"
cat "$log"
# the largest graph tried: 90M nodes (900M edges), two epochs (one measured), as time allows
t=$(date +%s)
timeout ${GPUMEM_LIMIT:-240} node bench/tiered/run.js --nodes 90000000 --epochs 2 --repeats 1 --timeout 235 \
  --config 'tiered, row blocks, bf16, graph on host|tiered:placement.graph=host|--row-blocks 50 --feature-dtype bf16' \
  --json "$out/gcn-90000000.json" > "$out/gcn.log" 2>&1
echo "gcn 90M exit $? after $(( $(date +%s) - t )) s" >> "$log"
tail -8 "$out/gcn.log" >> "$log"
