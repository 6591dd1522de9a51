// The native replay loop (gpumem/replay.hpp): out-of-memory failures counted, or the pass ended at
// the first of them (stop_at_first_oom) for a caller that only asks whether a program fits.
#include <cstdint>
#include <vector>

#include <doctest/doctest.h>

#include "gpumem/host_resource.hpp"
#include "gpumem/limiting_adaptor.hpp"
#include "gpumem/replay.hpp"

using namespace gpumem;
using bench::replay_action;
using bench::replay_op;

namespace {

// 600 bytes held, then `failing` requests of 600 bytes each, allocated and freed: under a 1 KiB
// limit every one of them fails.
std::vector<replay_op> held_then_failing(std::uint32_t failing) {
  std::vector<replay_op> ops{{replay_action::allocate, 0, 600, nullptr}};
  for (std::uint32_t i = 0; i < failing; ++i) {
    ops.push_back({replay_action::allocate, 1, 600, nullptr});
    ops.push_back({replay_action::deallocate, 1, 600, nullptr});
  }
  ops.push_back({replay_action::deallocate, 0, 600, nullptr});
  return ops;
}

}  // namespace

TEST_CASE("every out-of-memory is counted by default, and its free skipped") {
  host_resource host;
  limiting_adaptor limited(host, 1024);
  const auto r = bench::replay(limited, held_then_failing(5), 2, bench::replay_options{});
  REQUIRE(r.passes.size() == 1);
  CHECK(r.passes[0].ooms == 5);
  CHECK(r.passes[0].skipped_frees == 5);
  CHECK_FALSE(r.passes[0].stopped);
  CHECK(r.passes[0].frees == 1);
  CHECK(limited.stats().allocated_bytes == 0);
}

TEST_CASE("stop_at_first_oom ends each pass at its first failure and frees what it held") {
  host_resource host;
  limiting_adaptor limited(host, 1024);
  bench::replay_options options;
  options.repeats = 2;
  options.stop_at_first_oom = true;
  const auto r = bench::replay(limited, held_then_failing(100000), 2, options);
  REQUIRE(r.passes.size() == 2);
  for (const auto& pass : r.passes) {
    CHECK(pass.ooms == 1);
    CHECK(pass.stopped);
    CHECK(pass.allocs == 1);  // the held block, then the failure: nothing after it ran
    CHECK(pass.frees == 0);
  }
  CHECK(limited.stats().allocated_bytes == 0);
  // a program that fits runs to its end either way
  const auto fits = bench::replay(limited, held_then_failing(0), 1, options);
  CHECK(fits.passes[0].ooms == 0);
  CHECK_FALSE(fits.passes[0].stopped);
  CHECK(fits.passes[0].frees == 1);
}
