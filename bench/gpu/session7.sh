#!/usr/bin/env bash
# Device call: the seed GCN at 50M nodes and 500M edges on one H100 with tiered (row-block plan,
# bf16 features, the graph in pinned host memory), then larger graphs until one does not train.
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
log="$out/summary.txt"
: > "$log"
free -g >> "$log"
for nodes in ${GPUMEM_NODES:-50000000}; do
  t=$(date +%s)
  timeout ${GPUMEM_LIMIT:-420} node bench/tiered/run.js --nodes "$nodes" --epochs 3 --repeats ${GPUMEM_REPEATS:-1} --timeout 400 \
    --config 'tiered, row blocks, bf16, graph on host|tiered:placement.graph=host|--row-blocks 50 --feature-dtype bf16' \
    --json "$out/gcn-$nodes.json" >> "$out/gcn.log" 2>&1
  echo "gcn $nodes exit $? after $(( $(date +%s) - t )) s" >> "$log"
done
cat "$log"
