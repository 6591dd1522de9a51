#!/usr/bin/env bash
# Builds torch_memory_saver (the peer of bench/sleep) on a machine with nvcc and no GPU, and lays it out
# where sleep_bench.py finds it:
#
#   bash bench/sleep/build_peer.sh SOURCE_TREE [COMMIT]
#
#   bench/sleep/out/peer/torch_memory_saver-*.whl   the wheel
#   bench/sleep/out/peer/site/                       the wheel unzipped (a PYTHONPATH entry; its libraries
#                                                    are abi3, so any CPython 3.9+ imports it)
#   bench/sleep/out/peer/COMMIT                      COMMIT as given (recorded in sleep_bench's JSON)
#
# SOURCE_TREE is a checkout of https://github.com/fzyzcjy/torch_memory_saver. Its setup.py needs neither
# torch nor a GPU: it compiles csrc/*.cpp with g++ against CUDA's headers and links libcuda and libcudart.
# Without a driver, libcuda comes from a stub made here that defines the driver functions the hook
# calls, so that the libraries record libcuda.so.1 as needed and load the host's driver when imported
# (no LD_PRELOAD). Uses Debian's python3 with python3-setuptools, python3-wheel and python3-pip.
set -euo pipefail
src=${1:?usage: bash bench/sleep/build_peer.sh SOURCE_TREE [COMMIT]}
commit=${2:-unknown}
here="$(cd "$(dirname "$0")" && pwd)"
out="$here/out/peer"
python=${PYTHON:-/usr/bin/python3}
cuda_home=${CUDA_HOME:-/usr/local/cuda}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# the driver functions the hook libraries call (nm of a first build against a symbol-less stub)
syms="cuCtxGetDevice cuDeviceGet cuDeviceGetAttribute cuGetErrorString cuMemAddressFree cuMemAddressReserve cuMemCreate
  cuMemGetAllocationGranularity cuMemMap cuMemRelease cuMemSetAccess cuMemUnmap"
mkdir -p "$work/stub"
for s in $syms; do echo "void $s(void) {}"; done >"$work/stub/stub.c"
gcc -shared -fPIC "$work/stub/stub.c" -Wl,-soname,libcuda.so.1 -o "$work/stub/libcuda.so"

cp -r "$src" "$work/src"
rm -rf "$work/src/build" "$work/src"/*.egg-info
(cd "$work/src" && CUDA_HOME="$cuda_home" LIBRARY_PATH="$work/stub" TMS_CUDA_MAJOR=13 \
  "$python" -m pip wheel --no-deps --no-build-isolation -w "$work/wheel" .)

rm -rf "$out"
mkdir -p "$out/site"
cp "$work"/wheel/*.whl "$out/"
"$python" -m zipfile -e "$out"/*.whl "$out/site"
echo "$commit" >"$out/COMMIT"
for lib in "$out"/site/*.so; do
  # every driver function the library calls must come from libcuda.so.1
  missing=$(nm -D --undefined-only "$lib" | awk '$2 ~ /^cu[A-Z]/ && $2 !~ /@/ {print $2}' | grep -vxF -f <(tr -s ' \n' '\n' <<<"$syms") || true)
  [ -z "$missing" ] || { echo "build_peer.sh: $lib calls driver functions the stub lacks: $missing" >&2; exit 1; }
  readelf -d "$lib" | grep -q 'NEEDED.*libcuda.so.1' || { echo "build_peer.sh: $lib does not need libcuda.so.1" >&2; exit 1; }
done
ls -l "$out" "$out/site"
