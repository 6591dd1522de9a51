// The VMM primitive (gpumem/vmm.hpp) on its host implementation, and its two decorators: one physical
// allocation mapped at two addresses shows the same bytes (what a move between tiers relies on), an
// unmapped range is a reservation again, and limit and fault injection count the bytes created and
// not released, failing a create before the inner vmm is asked.
#include <sys/resource.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "gpumem/errors.hpp"
#include "gpumem/vmm.hpp"

using namespace gpumem;

namespace {

constexpr std::size_t granule = std::size_t{64} << 10;

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const out_of_memory& e) {
    return e.what();
  }
  return {};
}

}  // namespace

TEST_CASE("the host vmm maps one physical allocation at two addresses, with the same content") {
  auto memory = make_host_vmm(granule);
  CHECK(memory->granule_bytes() == granule);
  CHECK(memory->kind() == memory_kind::host);
  CHECK(memory->device() == -1);
  CHECK(memory->total_bytes() == 0);
  void* range = memory->reserve(4 * granule);
  CHECK(reinterpret_cast<std::uintptr_t>(range) % granule == 0);
  auto* a = static_cast<unsigned char*>(range);
  unsigned char* b = a + 2 * granule;
  const vmm::handle h = memory->create(2 * granule, placement::host);
  memory->map(a, 2 * granule, h, placement::host);
  std::memset(a, 0x5a, 2 * granule);
  memory->map(b, 2 * granule, h, placement::host);
  CHECK(b[0] == 0x5a);
  CHECK(b[2 * granule - 1] == 0x5a);
  b[17] = 0x11;  // one allocation: a write through either address shows at the other
  CHECK(a[17] == 0x11);
  memory->unmap(a, 2 * granule);
  memory->unmap(b, 2 * granule);
  memory->release(h);
  // The range is a reservation again: a new allocation maps there and starts out zeroed.
  const vmm::handle fresh = memory->create(granule, placement::device);
  memory->map(a, granule, fresh, placement::device);
  CHECK(a[17] == 0);
  memory->unmap(a, granule);
  memory->release(fresh);
  memory->free_range(range, 4 * granule);
}

TEST_CASE("the limit decorator counts the bytes created and not released, whatever is mapped") {
  auto memory = make_limited_vmm(make_host_vmm(granule), 3 * granule);
  const vmm::handle h = memory->create(2 * granule, placement::device);
  const std::string why = message_of([&] { memory->create(2 * granule, placement::host); });
  CHECK(why.find("limit: ") == 0);
  CHECK(why.find("limit in use") != std::string::npos);
  const vmm::handle g = memory->create(granule, placement::host);  // exactly the limit
  memory->release(h);
  const vmm::handle k = memory->create(2 * granule, placement::device);  // room again
  memory->release(g);
  memory->release(k);
}

TEST_CASE("the fault decorator fails every Nth create and any past its budget") {
  fault_options every;
  every.fail_every = 3;
  auto memory = make_fault_injecting_vmm(make_host_vmm(granule), every);
  const vmm::handle a = memory->create(granule, placement::device);
  const vmm::handle b = memory->create(granule, placement::device);
  const std::string why = message_of([&] { memory->create(granule, placement::device); });
  CHECK(why.find("fault injection: injected out-of-memory: physical allocation #3") == 0);
  CHECK(why.find("fail_every 3") != std::string::npos);
  const vmm::handle c = memory->create(granule, placement::device);  // attempt 4 passes
  for (vmm::handle h : {a, b, c}) memory->release(h);

  fault_options budget;
  budget.fail_after_bytes = 2 * granule;
  auto capped = make_fault_injecting_vmm(make_host_vmm(granule), budget);
  const vmm::handle d = capped->create(2 * granule, placement::device);
  CHECK(message_of([&] { capped->create(granule, placement::device); }).find("budget (fail_after_bytes)") !=
        std::string::npos);
  capped->release(d);
  capped->release(capped->create(granule, placement::device));  // released bytes count no more
}

TEST_CASE("the host vmm raises the soft open-file limit when it runs out of descriptors") {
  rlimit limit{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &limit) == 0);
  constexpr rlim_t low = 64;
  constexpr std::size_t wanted = 200;  // more allocations than the lowered soft limit allows descriptors
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < 4 * wanted) {
    MESSAGE("skipped: the hard open-file limit (" << limit.rlim_max << ") leaves no room to raise to");
    return;
  }
  rlimit lowered = limit;
  lowered.rlim_cur = low;
  REQUIRE(setrlimit(RLIMIT_NOFILE, &lowered) == 0);
  auto memory = make_host_vmm(granule);
  std::vector<vmm::handle> held;
  for (std::size_t i = 0; i < wanted; ++i) held.push_back(memory->create(granule, placement::device));
  rlimit now{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &now) == 0);
  CHECK(now.rlim_cur == limit.rlim_max);
  for (vmm::handle h : held) memory->release(h);
  setrlimit(RLIMIT_NOFILE, &limit);
}

TEST_CASE("the host vmm rejects a granule that is not a power of two of at least a page") {
  CHECK_THROWS_AS(make_host_vmm(3 * granule), invalid_argument);
  CHECK_THROWS_AS(make_host_vmm(512), invalid_argument);
}

#ifndef GPUMEM_WITH_CUDA
// (With CUDA, the device vmm is what the GPU suites of expandable, caching and tiered run over.)
TEST_CASE("without CUDA the device vmm's error names the strategy and how to pick its host twin") {
  vmm_options o;
  o.owner = "tiered";
  o.host_twin_hint = "upstream 'host'";
  try {
    make_device_vmm(0, o);
    FAIL("expected invalid_state");
  } catch (const invalid_state& e) {
    CHECK(std::string(e.what()).find("tiered: gpumem was built without CUDA; use the host twin (upstream 'host')") !=
          std::string::npos);
  }
}
#endif
