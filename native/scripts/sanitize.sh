#!/usr/bin/env bash
# The C++ unit tests under the sanitizers, as CI runs them (host memory, no GPU needed):
#   1. AddressSanitizer + UndefinedBehaviorSanitizer (leaks included): every test, in native/build-tests-san;
#   2. ThreadSanitizer: the tests that share resources between std::threads (and the host communicator's
#      processes), in native/build-tests-tsan.
# Any report fails the run (ctest.sh sets halt_on_error and the build uses -fno-sanitize-recover=all).
# Prints how long each part took. Extra arguments go to both ctest runs.
set -euo pipefail

scripts="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
thread_tests='pool_thread_test|fault_injection_test|adaptors_test|pool_stream_destroy_test|plugin_resource_test|expandable_stream_oom_test|trace_recorder_test|oom_report_test|tiered_test|tiered_sleep_test|expandable_sleep_test|sleep_engine_test|host_communicator_test'

start=$SECONDS
GPUMEM_SANITIZE=address,undefined bash "$scripts/ctest.sh" "$@"
asan_s=$((SECONDS - start))

start=$SECONDS
GPUMEM_SANITIZE=thread bash "$scripts/ctest.sh" -R "$thread_tests" "$@"
tsan_s=$((SECONDS - start))

echo "== sanitizers: address,undefined ${asan_s}s; thread ${tsan_s}s (build and run)"
