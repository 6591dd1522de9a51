#!/usr/bin/env bash
# One device call: the GPU test suites, then gcn-seed at 2M nodes under compare and three
# consecutive `npm start` runs (mlp-seed). Logs and JSON go to $OUT.
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv > "$out/gpu.txt" 2>&1
git rev-parse --short HEAD >> "$out/gpu.txt" 2>/dev/null || true
start=$(date +%s)
timeout 330 npm run test:gpu -- --exclude tests/report-browser.test.ts --exclude tests/guide.test.ts > "$out/test-gpu.log" 2>&1
echo "test:gpu exit $? after $(( $(date +%s) - start )) s" >> "$out/gpu.txt"
t=$(date +%s)
timeout 120 node packages/cli/dist/cli.js compare --model gcn --nodes 2000000 --allocators pool,async,cuda --epochs 3 \
  --json "$out/gcn2m.json" > "$out/bench.log" 2>&1
echo "gcn compare exit $? after $(( $(date +%s) - t )) s" >> "$out/gpu.txt"
for i in 1 2 3; do
  t=$(date +%s)
  timeout 100 npm start >> "$out/bench.log" 2>&1
  echo "npm start $i exit $? after $(( $(date +%s) - t )) s" >> "$out/gpu.txt"
  cp gpumem-compare.json "$out/start-$i.json" 2>/dev/null
done
cat "$out/gpu.txt"
