#!/usr/bin/env bash
# Builds the C++ unit tests (host-only unless GPUMEM_CTEST_CUDA=ON) and runs them with ctest. Works from any directory.
#   bash native/scripts/ctest.sh                                  # RelWithDebInfo, native/build-tests
#   GPUMEM_SANITIZE=address,undefined bash native/scripts/ctest.sh # sanitized, native/build-tests-san
#   GPUMEM_SANITIZE=thread bash native/scripts/ctest.sh -R thread  # ThreadSanitizer, native/build-tests-tsan
#   GPUMEM_CTEST_CUDA=ON bash native/scripts/ctest.sh              # with CUDA (GPU cases run), native/build-tests-cuda
# Extra arguments go to ctest (e.g. -R pool_basic).
# A sanitized run stops at the first report and fails (see the *SAN_OPTIONS below); native/scripts/sanitize.sh
# runs both, as CI does.
set -euo pipefail

native_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sanitize="${GPUMEM_SANITIZE:-}"
cuda="${GPUMEM_CTEST_CUDA:-OFF}"
if [[ "$sanitize" == *thread* ]]; then
  build_dir="$native_dir/build-tests-tsan"  # ThreadSanitizer cannot share objects with ASan
elif [[ -n "$sanitize" ]]; then
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
if [[ -n "$sanitize" ]]; then
  # Any report fails the test (UBSan is also built with -fno-sanitize-recover=all); callers may add options.
  export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:strict_string_checks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
  export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
fi
ctest --test-dir "$build_dir" --output-on-failure "$@"
