#!/usr/bin/env bash
# The GPU suites, by name, in one call on a GPU host. From the project root, after ../shared/gpu/pack
# (see bench/README.md):
#
#   bash .gpu/run.sh bash bench/gpu/suite.sh test torch           # on the GPU host
#   bash bench/gpu/suite.sh help                                  # the suites
#
# Output goes to $OUT (or bench/gpu/out/<UTC date and time>/ when OUT is unset), three files at most
# whatever the suites, since the GPU host returns only a few files from $OUT:
#   summary.txt   the device, the commit, each step's exit status and time, the test counts
#   suite.log     every step's output, one after the other
#   results.tgz   the JSON (and JSON lines) the benchmarks wrote, under results/<suite>-<name>
# Each step runs under `timeout`; a step that fails or times out is reported and the next one runs.
# The exit status is the number of failed steps (capped at 100).
set -uo pipefail

suites_help() {
  cat <<'EOF'
Usage: bash bench/gpu/suite.sh SUITE [SUITE ...]     (on a GPU host: bash .gpu/run.sh bash bench/gpu/suite.sh ...)

Suites (each fits one device call of 10 minutes; tiered and large take most of one):
  test          npm run test:gpu (ctest on CUDA, then vitest with the GPU required), without the browser
                test (no Chromium on the GPU host), the guide and the pack-install tests (no registry there)
  torch         the PyTorch tests: python3 -m unittest discover -s bindings/python/tests -v, in two steps
                (needs native/build/Release/libgpumem_torch.so from the packed tree); about 9 minutes on an
                H200, more than one device call leaves after run.sh has unpacked the tree
  torch-1       the first half of torch (test_[a-h]*.py), for one call
  torch-2       the second half of torch (test_[i-z]*.py), for one call
  torch-driver  the PyTorch library on older drivers: test_driver_gpu.py and test_driver.py alone (part of
                torch too): each strategy under an interposer reporting CUDA 12.0, 12.4, 12.8
  torch-gcn     the seed GCN at 2M nodes under PyTorch's caching allocator and gpumem's strategies
                (bench/torch/run.sh; NODES, EPOCHS and ALLOCATORS as that script takes them)
  sanitize      compute-sanitizer memcheck and racecheck over the GPU op and behaviour tests
  alloc         malloc+free pair latency, every strategy (bench/alloc), in 5 processes (a process is
                fast or slow as a whole), and pool_microbench if built
  fragmentation the fragmentation traces, 3 repeats, in 3 processes (bench/fragmentation), with the
                PyTorch baselines
  corpus        the real-workload corpus (bench/traces/*.torch.pickle.gz) replayed through each
                strategy with its minimum capacity, and the gpumem capture of GPT-2 fine-tuning
  capture       what recording a trace inside PyTorch costs (bench/traces/capture_overhead.py)
  compare       gcn-seed at 2M nodes under gpumem compare, then `npm start` three times
  noise         why eager mlp epochs vary between processes: bench/gpu/diag-epoch-noise.sh (the mlp in fresh
                processes under several CPU placements, with CPU time, GC, context switches, clocks; N, EPOCHS,
                PLACEMENTS as that script takes them)
  train         bench/train (mlp-seed and gcn-seed per allocator) and the PyTorch baselines (bench/baselines)
  record        what recording the memory timeline costs (bench/record)
  soak          10M mixed-size operations over 4 streams per strategy (bench/soak), in 3 processes
  link          the host link: zero-copy, copies, managed memory (bench/link)
  checkpoint    activation checkpointing and nano-batches against the formulas, pool and uvm (bench/checkpoint)
  tiered        the seed GCN at 28M nodes: pool against tiered, plain and row-block plans, the graph on host
  prefetch      uvm at 10M nodes: prefetch on allocate, none, trainer-inserted (bench/tiered)
  large         the seed GCN beyond the device on tiered (bench/tiered): N from LARGE_NODES (default
                50000000; space-separated for several), LARGE_EPOCHS (3), LARGE_ALLOCATOR
                (tiered:placement.graph=host; tiered:placement.graph=host:placement.activations=host
                keeps activations on the host past ~55M nodes), LARGE_TIMEOUT (290 s a run)
  multi         bench/multi at 2M nodes: one device, one NCCL rank, two ranks sharing cuda:0 over the
                host communicator (and two NCCL ranks on cuda:0,1 where there are two GPUs, four on 0-3
                where there are four); the data-parallel mlp (CUDA graphs) over the same ranks; the
                largest N that trains on one device and on every GPU (bench/multi/largest.js); gpumem
                info. MULTI_PARTS=timed or largest runs one half (each about one device call)
  transformer   the transformer workload: its PyTorch baseline 3 times (bench/baselines/transformer_torch.py,
                epochs timed without a synchronisation per step, as gpumem times them),
                then gpumem compare --model transformer over cuda, pool, async and expandable, 3 runs each
  torch-live    real PyTorch programs run live under PyTorch's allocators and gpumem's (bench/torch-live;
                PROGRAMS, CONFIGS, REPEATS, STEPS as that script takes them; the whole grid needs more than
                one call: split it by PROGRAMS)
  devices       the multi-device tests, gpumem compare --devices 0,0, the mlp's captured step with and
                without one NCCL rank, and bench/gpu/diag-mlp-ranks.mjs (reduction order over ranks)
  sleep         sleep and wake by tag (bench/sleep, README.md): a CUDA graph replayed bit for bit after
                sleep and wake (graph_replay.py: GPT-2 small, MemPool and enable() paths), an RL-style loop
                whose phases sleep each other's memory against the same run without sleeping (rl_loop.py:
                losses and tokens identical), then sleep/wake timings of gpumem against torch_memory_saver
                and a pinned copy (sleep_bench.py, 1-64 GiB, keep and discard; cases past a 245 s deadline
                are skipped and listed; SLEEP_CASES picks cases, as --cases takes them). Needs the peer's
                unzipped wheel in bench/sleep/out/peer/site (carry bench/sleep/out), transformers
  doctor        gpumem doctor's verdicts against real runs (bench/doctor/agree.py): each program of
                DOCTOR_PROGRAMS (gpt2_finetune,seed_gcn) recorded, then run at the capacities where the
                doctor says PyTorch's default fits, runs out from fragmentation, and runs out for real
  all           every suite above, in that order (more than one device call's time: for a full host)
  help          this text

Environment: OUT (the output folder), NCCL_NVLS_ENABLE (set to 0 unless set).
EOF
}

all_suites="test torch torch-gcn transformer torch-live sanitize alloc fragmentation corpus capture compare noise train record soak link checkpoint tiered prefetch large multi devices sleep doctor"

if [ $# -eq 0 ] || [ "$1" = help ] || [ "$1" = -h ] || [ "$1" = --help ]; then
  suites_help
  exit 0
fi

cd "$(dirname "$0")/../.." || exit 1
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
# The C++ unit tests need doctest; where a GPU host has none (it has no package registry), a copy shipped in
# .gpu/doctest (include/ and lib/cmake/doctest/, see bench/README.md) is found through CMAKE_PREFIX_PATH.
[ -d .gpu/doctest ] && export CMAKE_PREFIX_PATH="$PWD/.gpu/doctest${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"

cli=packages/cli/dist/cli.js

# step SUITE NAME LIMIT COMMAND...: run COMMAND under timeout LIMIT (seconds), output to suite.log
step() {
  local suite=$1 name=$2 limit=$3
  shift 3
  local t=$(date +%s)
  printf '\n===== %s / %s: %s\n' "$suite" "$name" "$*" >>"$log"
  timeout "$limit" "$@" >>"$log" 2>&1
  local rc=$?
  [ $rc -ne 0 ] && failed=$((failed + 1))
  printf '%-14s %-28s exit %3d after %4d s\n' "$suite" "$name" "$rc" "$(($(date +%s) - t))" >>"$summary"
  return $rc
}

# json SUITE NAME: where a step writes its JSON (collected into results.tgz)
json() { echo "$results/results/$1-$2"; }

# counts: the test counts of the steps logged so far (vitest, ctest, unittest)
counts() {
  grep -E "Test Files|Tests  |tests passed|^Ran [0-9]|^OK|^FAILED|skipped:" "$log" | tail -n "${1:-12}" >>"$summary"
}

suite_test() {
  step test test:gpu 540 npm run test:gpu -- --exclude tests/report-browser.test.ts --exclude tests/guide.test.ts \
    --exclude tests/pack-install.test.ts
  counts 6
}

# The PyTorch tests in two halves by file name, each fitting a device call.
suite_torch-1() {
  step torch unittest-a-h 560 python3 -m unittest discover -s bindings/python/tests -p 'test_[a-h]*.py' -v
  counts 3
}

suite_torch-2() {
  step torch unittest-i-z 560 python3 -m unittest discover -s bindings/python/tests -p 'test_[i-z]*.py' -v
  counts 3
}

suite_torch() {
  suite_torch-1
  suite_torch-2
}

suite_torch-driver() {
  # The library under native/tests/driver/fake_cuda.c at CUDA 12.0, 12.4 and 12.8 (also part of torch).
  step torch-driver unittest 420 python3 -m unittest discover -s bindings/python/tests -p 'test_driver*.py' -v
  counts 3
}

suite_torch-gcn() {
  local tmp
  tmp=$(mktemp -d)
  step torch-gcn run.sh 560 env NODES="${NODES:-2000000}" EPOCHS="${EPOCHS:-10}" bash bench/torch/run.sh "$tmp/torch-gcn.jsonl"
  for f in "$tmp"/torch-gcn-*.log; do
    [ -f "$f" ] && { printf '\n--- %s\n' "$(basename "$f")"; cat "$f"; } >>"$log"
  done
  cp "$tmp/torch-gcn.jsonl" "$(json torch-gcn torch-gcn.jsonl)" 2>/dev/null
  rm -rf "$tmp"
}

suite_sanitize() {
  step sanitize memcheck 300 compute-sanitizer --tool memcheck --target-processes all \
    npx vitest run tests/ops-gpu.test.ts tests/gpu-behaviour.test.ts tests/faults.test.ts
  step sanitize racecheck 300 compute-sanitizer --tool racecheck --target-processes all npx vitest run tests/ops-gpu.test.ts
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -n 2 >>"$summary"
}

suite_alloc() {
  local i
  for i in 1 2 3 4 5; do
    step alloc "alloc-$i" 100 node bench/alloc/run.js --out "$(json alloc "alloc-$i.json")"
  done
  local bench
  for bench in native/build-tests-cuda/tests/pool_microbench native/build-tests/tests/pool_microbench; do
    if [ -x "$bench" ]; then
      step alloc pool_microbench 60 "$bench"
      break
    fi
  done
}

suite_fragmentation() {
  local i
  for i in 1 2 3; do
    step fragmentation "run.js-$i" 150 node bench/fragmentation/run.js --repeats 3 --out "$(json fragmentation "fragmentation-$i.json")"
  done
  step fragmentation torch_baseline.py 120 python3 bench/fragmentation/torch_baseline.py --out "$(json fragmentation torch-baseline.json)"
}

suite_corpus() {
  local name allocators
  for name in seed_gcn graphsage resnet50 gpt2_finetune gpt2_generate; do
    allocators=pool,async,expandable,cuda
    # 114k cudaMalloc+cudaFree pairs a pass: minutes for each capacity probe
    [ "$name" = gpt2_generate ] && allocators=pool,async,expandable
    step corpus "$name" 150 node "$cli" replay "bench/traces/$name.torch.pickle.gz" --allocators "$allocators" \
      --min-capacity --repeat 3 --json "$(json corpus "$name.json")"
  done
  # the gpumem capture of the same program replays to the same peaks
  step corpus gpt2_finetune.gpumem 40 node "$cli" replay bench/traces/gpt2_finetune.gpumem.jsonl.gz --allocators pool --repeat 1
}

suite_capture() {
  step capture capture_overhead.py 400 python3 bench/traces/capture_overhead.py --repeats 3 --epochs 10 \
    --json "$(json capture capture-overhead.json)"
}

suite_compare() {
  step compare gcn-2m 120 node "$cli" compare --model gcn --nodes 2000000 --allocators pool,async,cuda,expandable \
    --epochs 3 --json "$(json compare gcn-2m.json)"
  local i
  for i in 1 2 3; do
    step compare "npm-start-$i" 150 npm start
    [ -f gpumem-compare.json ] && gzip -c gpumem-compare.json >"$(json compare "npm-start-$i.json.gz")"
  done
}

suite_train() {
  step train mlp 200 node bench/train/run.js --workload mlp --epochs 3 --out "$(json train mlp.json)"
  step train gcn 300 node bench/train/run.js --workload gcn --nodes 2000000 --epochs 5 --out "$(json train gcn.json)"
  local mode variant
  for mode in eager compile; do
    step train "baseline-mlp-$mode" 150 sh -c "python3 bench/baselines/mlp_torch.py --epochs 3 --mode $mode > '$(json train "baseline-mlp-$mode.jsonl")'"
  done
  for variant in index_add pyg sparse; do
    step train "baseline-gcn-$variant" 150 sh -c "python3 bench/baselines/gcn_torch.py --nodes 2000000 --epochs 5 --variant $variant > '$(json train "baseline-gcn-$variant.jsonl")'"
  done
}

suite_record() {
  step record record 200 node bench/record/run.js --out "$(json record record.json)"
}

suite_soak() {
  local i
  for i in 1 2 3; do
    step soak "soak-$i" 180 node bench/soak/run.js --allocators pool,async,cuda,uvm --out "$(json soak "soak-$i.json")"
    [ -f "$(json soak "soak-$i.json")" ] && gzip "$(json soak "soak-$i.json")"
  done
}

suite_link() {
  step link link 90 node bench/link/run.js --json "$(json link link.json)"
}

suite_checkpoint() {
  step checkpoint pool 90 node bench/checkpoint/run.js --json "$(json checkpoint pool.json)"
  step checkpoint uvm 60 node bench/checkpoint/run.js --allocator uvm --checkpoints off,2 --nano-batches 1 \
    --json "$(json checkpoint uvm.json)"
  step checkpoint uvm-layer-prefetch 60 node bench/checkpoint/run.js --allocator uvm --layer-prefetch --checkpoints off,2 \
    --nano-batches 1 --json "$(json checkpoint uvm-layer-prefetch.json)"
}

suite_tiered() {
  step tiered 28m 560 node bench/tiered/run.js --nodes 28000000 --epochs 3 --repeats 2 \
    --config 'pool|pool|' \
    --config 'tiered|tiered|' \
    --config 'pool, row blocks|pool|--row-blocks 28' \
    --config 'tiered, row blocks|tiered|--row-blocks 28' \
    --config 'tiered, row blocks, graph on host|tiered:placement.graph=host|--row-blocks 28' \
    --json "$(json tiered 28m.json)"
}

suite_prefetch() {
  step prefetch 10m-uvm 300 node bench/tiered/run.js --nodes 10000000 --epochs 3 --repeats 2 \
    --config 'uvm (prefetch on allocate)|uvm|' \
    --config 'uvm, no prefetch|uvm:prefetchOnAllocate=false|' \
    --config 'uvm, trainer-inserted prefetch|uvm:prefetchOnAllocate=false|--layer-prefetch' \
    --json "$(json prefetch 10m-uvm.json)"
}

suite_large() {
  free -g >>"$summary"
  local nodes limit=${LARGE_TIMEOUT:-290}
  for nodes in ${LARGE_NODES:-50000000}; do
    step large "$nodes" $((limit + 10)) node bench/tiered/run.js --nodes "$nodes" --epochs "${LARGE_EPOCHS:-3}" --repeats 1 \
      --timeout "$limit" \
      --config "tiered, row blocks, bf16|${LARGE_ALLOCATOR:-tiered:placement.graph=host}|--row-blocks 50 --feature-dtype bf16" \
      --json "$(json large "$nodes.json")"
  done
}

suite_multi() {
  step multi info 30 node "$cli" info
  local gpus
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
  local configs=(--config 'one device|pool|-' --config 'one device, A·(x·W1ᵀ) each epoch|pool|-|every-epoch'
    --config 'one NCCL rank|pool|1' --config 'two ranks sharing cuda:0|pool|0,0|host')
  local mlp=(--config 'one device|pool|-' --config 'one NCCL rank|pool|1')
  local largest=(--config 'one device|pool|-')
  if [ "$gpus" -ge 2 ]; then
    configs+=(--config 'two NCCL ranks|pool|0,1')
    mlp+=(--config 'two NCCL ranks|pool|0,1')
  fi
  if [ "$gpus" -ge 4 ]; then
    configs+=(--config 'four NCCL ranks|pool|0,1,2,3')
    mlp+=(--config 'four NCCL ranks|pool|0,1,2,3')
    largest+=(--config 'four NCCL ranks|pool|0,1,2,3')
  elif [ "$gpus" -ge 2 ]; then
    largest+=(--config 'two NCCL ranks|pool|0,1')
  fi
  if [ "${MULTI_PARTS:-timed largest}" != largest ]; then
    step multi multi-2m 300 node bench/multi/run.js --nodes 2000000 --epochs 4 --repeats 3 --timeout 60 "${configs[@]}" \
      --json "$(json multi multi-2m.json)"
    step multi mlp 200 node bench/multi/run.js --model mlp --cuda-graph --epochs 4 --repeats 3 --timeout 60 \
      --allgather-bytes 4194304 "${mlp[@]}" --json "$(json multi mlp.json)"
  fi
  if [ "${MULTI_PARTS:-timed largest}" != timed ]; then
    step multi largest 420 node bench/multi/largest.js --epochs 2 --tolerance 0.03 --max-probes 7 --timeout 120 \
      "${largest[@]}" --json "$(json multi largest.json)"
  fi
}

suite_noise() {
  local tmp
  tmp=$(mktemp -d)
  step noise diag-epoch-noise 300 bash bench/gpu/diag-epoch-noise.sh "$tmp"
  cat "$tmp/noise-topology.txt" >>"$log" 2>/dev/null
  gzip -c "$tmp/noise.jsonl" >"$(json noise noise.jsonl.gz)" 2>/dev/null
  rm -rf "$tmp"
}

suite_devices() {
  step devices tests 200 env GPUMEM_REQUIRE_GPU=1 npx vitest run tests/distributed-gpu.test.ts packages/distributed \
    packages/gnn/src/training/train-distributed.test.ts tests/peer-access.test.ts packages/allocator-core/src/topology.test.ts \
    packages/cli/src/compare-devices.test.ts
  counts 3
  step devices compare-0,0 150 node "$cli" compare --model gcn --nodes 500000 --epochs 3 --devices 0,0 --communicator host \
    --allocators pool,async --json "$(json devices compare-devices.json)"
  local i
  for i in 1 2; do
    step devices "mlp-cuda-graph-$i" 100 node "$cli" train --model mlp --allocator pool --cuda-graph --epochs 3
    step devices "mlp-cuda-graph-rank-$i" 100 node "$cli" train --model mlp --allocator pool --cuda-graph --epochs 3 --devices 1
  done
  step devices diag-mlp-ranks 200 node bench/gpu/diag-mlp-ranks.mjs
  if [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')" -ge 2 ]; then
    step devices diag-two-gpu-mlp 150 node bench/gpu/diag-two-gpu-mlp.mjs
  fi
}

suite_transformer() {
  local i files=()
  for i in 1 2 3; do
    step transformer "torch-eager-$i" 120 bash -c "cd bench/baselines && python3 transformer_torch.py --epochs 3 --no-step-sync > $(json transformer "torch-eager-$i.jsonl")"
    files+=("$(json transformer "torch-eager-$i.jsonl")")
  done
  local joined
  joined=$(IFS=,; echo "${files[*]}")
  step transformer compare 300 node "$cli" compare --model transformer --allocators cuda,pool,async,expandable --epochs 3 \
    --repeat 3 --baseline "$joined" --json "$(json transformer compare.json)" --report "$(json transformer report.html)"
}

suite_sleep() {
  local peer="$PWD/bench/sleep/out/peer/site"
  local cases=()
  [ -n "${SLEEP_CASES:-}" ] && cases=(--cases "$SLEEP_CASES")
  step sleep graph-replay 80 python3 bench/sleep/graph_replay.py --timeout 25 --json "$(json sleep graph-replay.json)"
  step sleep rl-loop 160 python3 bench/sleep/rl_loop.py --rounds 2 --train-steps 2 --max-new-tokens 48 --timeout 75 \
    --json "$(json sleep rl-loop.json)"
  step sleep sleep-bench 255 env PYTHONPATH="$peer${PYTHONPATH:+:$PYTHONPATH}" python3 bench/sleep/sleep_bench.py \
    --deadline 245 "${cases[@]}" --json "$(json sleep sleep-bench.json)"
}

suite_doctor() {
  step doctor agree 560 python3 bench/doctor/agree.py --programs "${DOCTOR_PROGRAMS:-gpt2_finetune,seed_gcn}" --timeout 120 \
    --out "$results/doctor" --json "$(json doctor agree.json)"
}

suite_torch-live() {
  step torch-live run.sh 560 env OUT="$results/results/torch-live" bash bench/torch-live/run.sh
}

for s in "$@"; do
  if [ "$s" = all ]; then
    set -- $all_suites
    break
  fi
done
for s in "$@"; do
  if ! declare -F "suite_$s" >/dev/null; then
    echo "unknown suite '$s'" >&2
    suites_help >&2
    exit 2
  fi
done

out=${OUT:-bench/gpu/out/$(date -u +%Y-%m-%dT%H%M%S)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
summary="$out/summary.txt"
log="$out/suite.log"
results=$(mktemp -d)
mkdir -p "$results/results"
failed=0

finish() {
  if [ -n "$(ls -A "$results/results")" ]; then
    tar czf "$out/results.tgz" -C "$results" results
  fi
  rm -rf "$results"
}
trap finish EXIT

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  # GPUMEM_COMMIT first, as bench/sleep and bench/torch-live take it: a tree copied to a GPU host may carry a .git
  # older than the files measured, and git's HEAD says nothing of uncommitted changes
  echo "commit: ${GPUMEM_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo "unknown (no git here: set GPUMEM_COMMIT)")}"
  echo "suites: $*"
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv 2>&1
} >"$summary"
: >"$log"
for s in "$@"; do
  "suite_$s"
done
cat "$summary"
exit $((failed > 100 ? 100 : failed))
