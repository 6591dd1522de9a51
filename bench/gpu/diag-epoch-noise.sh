#!/usr/bin/env bash
# Why eager mlp epochs vary between processes: the host's topology and clocks, then the mlp in fresh
# processes under several placements (bench/gpu/diag-epoch-noise.mjs, one JSON line each), the GPU's
# clocks sampled meanwhile. From the project root on a GPU host:
#
#   bash bench/gpu/diag-epoch-noise.sh OUT_DIR        (N=5 processes per placement, EPOCHS=4)
#
# Placements: plain (as compare starts its children), near (taskset to the CPUs of the GPU's NUMA
# node), far (another node's CPUs, where there is one), two (two CPUs of the GPU's node), record (plain,
# every allocation event tracked, as compare does), cuda (plain, the cuda strategy). PLACEMENTS picks
# some (e.g. "plain cuda"). Nothing here
# changes a setting of the host or the GPU: it reads them.
set -uo pipefail
out=${1:?usage: diag-epoch-noise.sh OUT_DIR}
mkdir -p "$out"
n=${N:-5}
epochs=${EPOCHS:-4}
cd "$(dirname "$0")/../.." || exit 1
topo=$out/noise-topology.txt
lines=$out/noise.jsonl
: >"$lines"
{
  echo "== nproc $(nproc); $(uname -r); node $(node --version)"
  lscpu 2>/dev/null | grep -Ei 'model name|^cpu\(s\)|numa|mhz|thread|socket|hypervisor' || true
  echo "== governors: $(cat /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor 2>/dev/null | sort | uniq -c | tr '\n' ' ')"
  echo "== load: $(cat /proc/loadavg)"
  echo "== transparent huge pages: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)"
  nvidia-smi --query-gpu=index,name,pci.bus_id,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu,persistence_mode --format=csv 2>&1
  nvidia-smi topo -m 2>&1 | head -20
} >"$topo"
bus=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader -i 0 2>/dev/null | tr 'A-F' 'a-f' | sed 's/^0000//')
dev=/sys/bus/pci/devices/${bus}
near=$(cat "$dev/local_cpulist" 2>/dev/null || echo "0-$(($(nproc) - 1))")
node=$(cat "$dev/numa_node" 2>/dev/null || echo -1)
far=""
for d in /sys/devices/system/node/node[0-9]*; do
  [ -d "$d" ] && [ "$node" -ge 0 ] || continue
  [ "${d##*node}" = "$node" ] && continue
  far=$(cat "$d/cpulist")
  break
done
two=$(echo "$near" | awk -F'[,-]' '{print $1","$1+1}')
echo "== GPU 0 at $bus: NUMA node $node, local CPUs $near; another node's CPUs: ${far:-none}; two: $two" >>"$topo"

nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu --format=csv -lms 500 >"$out/noise-gpu-clocks.csv" 2>&1 &
smi=$!
one() {
  local label=$1
  shift
  for _ in $(seq "$n"); do
    "$@" node bench/gpu/diag-epoch-noise.mjs --epochs "$epochs" --label "$label" "${extra[@]}" >>"$lines" 2>>"$out/noise-stderr.txt"
  done
}
placements=" ${PLACEMENTS:-plain near far two record cuda} "
has() { [[ $placements == *" $1 "* ]]; }
extra=()
has plain && one plain env
has near && one near taskset -c "$near"
has far && [ -n "$far" ] && one far taskset -c "$far"
has two && one two taskset -c "$two"
extra=(--record)
has record && one record env
extra=(--allocator cuda)
has cuda && one cuda env
kill "$smi" 2>/dev/null
echo "== load after: $(cat /proc/loadavg)" >>"$topo"
node -e '
const lines = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").map(JSON.parse);
const f = (x) => (x === null || x === undefined ? "-" : Math.round(x));
const j = (e, g) => e.map(g).join("/");
for (const l of lines) {
  const e = l.epochs.slice(1);
  console.log(l.label.padEnd(7), l.allocator.padEnd(5), "epochs", j(e, (x) => f(x.epochMs)), "cpu", j(e, (x) => f(x.cpuMs)),
    "step p50 us", j(e, (x) => f(x.stepMs.p50 * 1000)), "p90", j(e, (x) => f(x.stepMs.p90 * 1000)), "spikes ms", j(e, (x) => f(x.stepMs.spikeMs)),
    "gc", j(e, (x) => f(x.gcMs)), "invol", j(e, (x) => x.involuntarySwitches), "steal", j(e, (x) => f(x.stealMs)),
    "cpus", [...new Set(e.flatMap((x) => x.cpus))].join(","),
    "probe js", f(l.probeBefore.jsMs) + "/" + f(l.probeAfter.jsMs), "native", f(l.probeBefore.nativeMs) + "/" + f(l.probeAfter.nativeMs));
}' "$lines" >>"$topo"
