#!/usr/bin/env bash
# Device call: after expandable maps runs of granules per driver-call sequence: the GPU suites,
# the PyTorch tests, the fragmentation traces and two corpus traces.
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
log="$out/summary.txt"
: > "$log"
t=$(date +%s)
timeout 200 npm run test:gpu -- --exclude tests/report-browser.test.ts --exclude tests/guide.test.ts > "$out/test-gpu.log" 2>&1
echo "test:gpu exit $? after $(( $(date +%s) - t )) s" >> "$log"
t=$(date +%s)
timeout 150 npm run test:torch >> "$out/test-gpu.log" 2>&1
echo "test:torch exit $? after $(( $(date +%s) - t )) s" >> "$log"
t=$(date +%s)
timeout 60 node bench/fragmentation/run.js --repeats 3 --out "$out/fragmentation.json" > "$out/bench.log" 2>&1
echo "fragmentation exit $? after $(( $(date +%s) - t )) s" >> "$log"
for name in gpt2_finetune graphsage; do
  timeout 60 node packages/cli/dist/cli.js replay "bench/traces/$name.torch.pickle.gz" --allocators pool,async,expandable \
    --min-capacity --repeats 3 --json "$out/$name.json" >> "$out/bench.log" 2>&1
  echo "replay $name exit $?" >> "$log"
done
grep -E "Test Files|Tests |vitest:|tests passed|^Ran |^OK|FAILED|×" "$out/test-gpu.log" >> "$log"
cat "$log"
