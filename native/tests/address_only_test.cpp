// Address-only memory (gpumem/address_only.hpp) and the chain builder's address_only setting: a
// strategy with the address_only flag runs over addresses backed by nothing, so a replay of 64 GiB
// requests takes no memory on any machine; any other strategy refuses the setting by name.
#include <cstdint>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "gpumem/address_only.hpp"
#include "gpumem/caching_resource.hpp"
#include "gpumem/chain_builder.hpp"
#include "gpumem/errors.hpp"
#include "gpumem/expandable_resource.hpp"
#include "gpumem/pool_resource.hpp"
#include "gpumem/strategy_registry.hpp"

using namespace gpumem;

namespace {

constexpr std::uint64_t GiB = std::uint64_t{1} << 30;

chain_spec address_only(const char* strategy, std::uint64_t limit) {
  chain_spec s;
  s.strategy = strategy;
  s.address_only = true;
  s.limit_bytes = limit;
  return s;
}

}  // namespace

TEST_CASE("the address-only leaf counts bytes and hands out aligned, distinct addresses it never backs") {
  auto leaf = make_address_only_resource();
  CHECK(leaf->kind() == memory_kind::host);
  void* a = leaf->allocate(64 * GiB, nullptr);
  void* b = leaf->allocate(1, nullptr);
  CHECK(a != b);
  CHECK(reinterpret_cast<std::uintptr_t>(b) % (std::uintptr_t{2} << 20) == 0);
  CHECK(leaf->stats().allocated_bytes == 64 * GiB + 1);
  leaf->deallocate(a, 64 * GiB, nullptr);
  leaf->deallocate(b, 1, nullptr);
  CHECK(leaf->stats().allocated_bytes == 0);
  CHECK_THROWS_AS(make_address_only_vmm(3000, 0), invalid_argument);
}

TEST_CASE("pool, expandable and caching declare the flag; the others do not") {
  std::vector<std::string> flagged;
  for (const strategy_descriptor* d : strategies()) {
    if (d->flags.address_only) flagged.push_back(d->name);
    CHECK(d->flags.address_only == (d->make_address_only_leaf != nullptr));
  }
  CHECK(flagged == std::vector<std::string>{"pool", "expandable", "caching"});
}

TEST_CASE("a pool over addresses serves 64 GiB requests under a 128 GiB limit, and runs out past it") {
  chain_spec s = address_only("pool", 128 * GiB);
  CHECK(chain_layers(s) == std::vector<std::string>{"addresses", "limit", "pool"});
  resource_chain chain = build_chain(s);
  memory_resource& top = chain.top();
  void* a = top.allocate(64 * GiB, nullptr);
  void* b = top.allocate(60 * GiB, nullptr);
  CHECK_THROWS_AS(top.allocate(8 * GiB, nullptr), out_of_memory);  // the limit, not the host
  top.deallocate(a, 64 * GiB, nullptr);
  top.deallocate(b, 60 * GiB, nullptr);
  CHECK(top.stats().allocated_bytes == 0);
}

TEST_CASE("expandable over address-only granules maps 64 GiB without a byte of memory") {
  chain_spec s = address_only("expandable", 128 * GiB);
  s.options<expandable_spec>().backing = placement::host;
  CHECK(chain_layers(s) == std::vector<std::string>{"addresses", "limit", "expandable"});
  resource_chain chain = build_chain(s);
  CHECK(chain.sleeper == nullptr);  // nothing to back up: no sleep over addresses
  void* a = chain.top().allocate(64 * GiB, nullptr);
  CHECK(chain.top().stats().reserved_bytes >= 64 * GiB);
  chain.top().deallocate(a, 64 * GiB, nullptr);
}

TEST_CASE("PyTorch's twin over addresses: 20 GiB segments, and expandable pages, with no memory behind them") {
  chain_spec s = address_only("caching", 128 * GiB);
  CHECK(chain_layers(s) == std::vector<std::string>{"addresses", "limit", "caching"});
  resource_chain chain = build_chain(s);
  void* a = chain.top().allocate(20 * GiB, nullptr);
  CHECK(chain.top().stats().reserved_bytes == 20 * GiB);  // a large request's segment: the request rounded to 2 MiB
  CHECK_THROWS_AS(chain.top().allocate(120 * GiB, nullptr), out_of_memory);  // the limit, not the host
  chain.top().deallocate(a, 20 * GiB, nullptr);

  chain_spec e = address_only("caching", 128 * GiB);
  e.options<caching_spec>().options.expandable_segments = true;
  resource_chain pages = build_chain(e);
  void* b = pages.top().allocate(64 * GiB, nullptr);
  CHECK(pages.top().stats().reserved_bytes >= 64 * GiB);
  pages.top().deallocate(b, 64 * GiB, nullptr);
}

TEST_CASE("a strategy without the flag refuses address_only, naming those that take it") {
  chain_spec s = address_only("host", GiB);
  try {
    validate(s);
    FAIL("no throw");
  } catch (const invalid_argument& e) {
    CHECK(e.argument() == std::string("addressOnly"));
    CHECK(std::string(e.what()).find("'pool', 'expandable', 'caching'") != std::string::npos);
  }
}
