#!/usr/bin/env bash
# Device call: at 28M nodes the row-block plan on pool and on tiered with everything on the device;
# then the seed GCN at 50M nodes and 500M edges on one H100 with tiered (row-block plan, bf16
# features, the graph in pinned host memory), then larger graphs.
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
log="$out/summary.txt"
: > "$log"
free -g >> "$log"
t=$(date +%s)
timeout 150 node bench/tiered/run.js --nodes 28000000 --epochs 3 --repeats 2 \
  --config 'pool, row blocks|pool|--row-blocks 28' \
  --config 'tiered, row blocks|tiered|--row-blocks 28' \
  --json "$out/gcn-28m-blocked.json" >> "$out/gcn.log" 2>&1
echo "gcn 28M row blocks exit $? after $(( $(date +%s) - t )) s" >> "$log"
for nodes in ${GPUMEM_NODES:-50000000}; do
  t=$(date +%s)
  timeout ${GPUMEM_LIMIT:-300} node bench/tiered/run.js --nodes "$nodes" --epochs 3 --repeats ${GPUMEM_REPEATS:-1} --timeout 290 \
    --config 'tiered, row blocks, bf16, graph on host|tiered:placement.graph=host|--row-blocks 50 --feature-dtype bf16' \
    --json "$out/gcn-$nodes.json" >> "$out/gcn.log" 2>&1
  echo "gcn $nodes exit $? after $(( $(date +%s) - t )) s" >> "$log"
done
cat "$log"
