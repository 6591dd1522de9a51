#!/usr/bin/env bash
# Device call: the seed GCN beyond the device's memory. At 28M nodes (fits on the device): pool
# and tiered, plain and row-block plans, the graph on the host; at 10M nodes: uvm with
# prefetch-on-allocate, without it, and with trainer-inserted prefetch; then 50M nodes on tiered.
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
log="$out/summary.txt"
: > "$log"
run() { # name, timeout, args...
  local name=$1 limit=$2; shift 2
  local t=$(date +%s)
  timeout "$limit" node bench/tiered/run.js "$@" --json "$out/$name.json" >> "$out/gcn.log" 2>&1
  echo "$name exit $? after $(( $(date +%s) - t )) s" >> "$log"
}
run gcn-28m 300 --nodes 28000000 --epochs 3 --repeats 2 \
  --config 'pool|pool|' \
  --config 'tiered|tiered|' \
  --config 'pool, row blocks|pool|--row-blocks 28' \
  --config 'tiered, row blocks, graph on host|tiered:placement.graph=host|--row-blocks 28'
run gcn-10m-uvm 200 --nodes 10000000 --epochs 3 --repeats 2 \
  --config 'uvm (prefetch on allocate)|uvm|' \
  --config 'uvm, no prefetch|uvm:prefetchOnAllocate=false|' \
  --config 'uvm, trainer-inserted prefetch|uvm:prefetchOnAllocate=false|--layer-prefetch'
cat "$log"
