#!/usr/bin/env bash
# Builds the C++ unit tests (host-only unless GPUMEM_CTEST_CUDA=ON) and runs them with ctest. Works from any directory.
#   bash native/scripts/ctest.sh                                  # RelWithDebInfo, native/build-tests
#   GPUMEM_SANITIZE=address,undefined bash native/scripts/ctest.sh # sanitized, native/build-tests-san
#   GPUMEM_CTEST_CUDA=ON bash native/scripts/ctest.sh              # with CUDA (GPU cases run), native/build-tests-cuda
# Extra arguments go to ctest (e.g. -R pool_basic).
set -euo pipefail

native_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sanitize="${GPUMEM_SANITIZE:-}"
cuda="${GPUMEM_CTEST_CUDA:-OFF}"
if [[ -n "$sanitize" ]]; then
  build_dir="$native_dir/build-tests-san"
elif [[ "$cuda" == "ON" ]]; then
  build_dir="$native_dir/build-tests-cuda"
else
  build_dir="$native_dir/build-tests"
fi
jobs="${GPUMEM_BUILD_JOBS:-2}"

cmake -S "$native_dir" -B "$build_dir" \
  -DGPUMEM_WITH_CUDA="$cuda" \
  -DGPUMEM_BUILD_TESTS=ON \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DGPUMEM_SANITIZE=$sanitize"
cmake --build "$build_dir" -j"$jobs"
ctest --test-dir "$build_dir" --output-on-failure "$@"
