#!/usr/bin/env bash
# Device call B (argument: corpus, frag or all): the real-workload corpus (bench/traces, PyTorch snapshots) replayed through each
# strategy with its minimum capacity; the fragmentation traces with the PyTorch peers; pair latency.
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
log="$out/summary-b.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv > "$log" 2>&1
part=${1:-all}
if [ "$part" != frag ]; then
mkdir -p "$out/replay"
for name in seed_gcn graphsage resnet50 gpt2_finetune gpt2_generate; do
  allocators=pool,async,expandable,cuda
  [ "$name" = gpt2_generate ] && allocators=pool,async,expandable   # 114k cudaMalloc+cudaFree per pass: minutes
  t=$(date +%s)
  timeout 150 node packages/cli/dist/cli.js replay "bench/traces/$name.torch.pickle.gz" --allocators "$allocators" \
    --min-capacity --repeats 3 --json "$out/replay/$name.json" >> "$out/replay.log" 2>&1
  echo "replay $name exit $? after $(( $(date +%s) - t )) s" >> "$log"
done
# the gpumem capture of the same program replays to the same peak
timeout 40 node packages/cli/dist/cli.js replay bench/traces/gpt2_finetune.gpumem.jsonl.gz --allocators pool --repeats 1 >> "$out/replay.log" 2>&1
echo "capture replay exit $?" >> "$log"
(cd "$out" && tar czf replay.tgz replay && rm -rf replay)
fi
if [ "$part" != corpus ]; then
t=$(date +%s)
timeout 150 node bench/fragmentation/run.js --repeats 3 --out "$out/fragmentation.json" > "$out/fragmentation.log" 2>&1
echo "fragmentation exit $? after $(( $(date +%s) - t )) s" >> "$log"
t=$(date +%s)
timeout 120 python3 bench/fragmentation/torch_peer.py --out "$out/torch_peer.json" >> "$out/fragmentation.log" 2>&1
echo "torch peer exit $? after $(( $(date +%s) - t )) s" >> "$log"
t=$(date +%s)
timeout 100 node bench/alloc/run.js --allocators pool,async,expandable --out "$out/alloc.json" >> "$out/fragmentation.log" 2>&1
echo "alloc exit $? after $(( $(date +%s) - t )) s" >> "$log"
fi
cat "$log"
