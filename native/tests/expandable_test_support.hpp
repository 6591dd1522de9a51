// Helpers shared by the host-only tests of expandable_resource: options with a small range per
// stream (and tag), and a resource over the VMM primitive's host implementation (vmm.hpp) with the fake
// stream_ordering of fake_ordering.hpp.
#pragma once
#include <cstdint>
#include <memory>
#include <utility>

#include "fake_ordering.hpp"
#include "gpumem/expandable_resource.hpp"
#include "gpumem/vmm.hpp"
#include "twin_granule.hpp"

namespace gpumem::test {

// Options whose ranges reserve 64 MiB of addresses each (the host twin's default: 64 GiB).
inline expandable_options small_range() {
  expandable_options o;
  o.reserve_bytes = std::uint64_t{64} * 1024 * 1024;
  return o;
}

// An expandable_resource over `memory` (by default the host twin with 64 KiB granules) whose stream
// ordering is a fake_ordering writing to `log`. Members are declared in construction order: the log
// outlives the resource.
struct expandable_fixture {
  explicit expandable_fixture(std::unique_ptr<vmm> memory = make_host_vmm(granule),
                              expandable_options options = small_range())
      : resource(std::move(memory), options, make_fake_ordering(log)) {}
  std::shared_ptr<fake_ordering_log> log = std::make_shared<fake_ordering_log>();
  expandable_resource resource;
};

}  // namespace gpumem::test
