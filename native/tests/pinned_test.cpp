// The 'pinned' strategy: a pool over mapped pinned host memory (pinned_host_resource), or over plain
// host memory (the host twin) where there is no GPU. On host memory: the cap on pinned bytes
// (/proc/meminfo parsing, MemAvailable less 10% of MemTotal, maxReservedBytes lowering it), the
// chain's layers, fine rounding (300 MiB + 1 B reserves 302 MiB, where a power-of-two pinned
// allocator takes 512 MiB) and a capped request failing as out_of_memory with the pool still usable.
// With a GPU (GPUMEM_CTEST_CUDA=ON on a GPU host): the pinned leaf itself, its kind, its host pointer
// being its device pointer, and the cap's message.
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "gpumem/chain_builder.hpp"
#include "gpumem/device.hpp"
#include "gpumem/errors.hpp"
#include "gpumem/pinned_host_resource.hpp"
#include "gpumem/strategy_registry.hpp"

using namespace gpumem;

namespace {

constexpr std::uint64_t KiB = 1024;
constexpr std::uint64_t MiB = 1024 * KiB;
constexpr std::uint64_t GiB = 1024 * MiB;

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& n : v) s += (s.empty() ? "" : " ") + n;
  return s;
}

chain_spec pinned_spec_on(pinned_upstream upstream) {
  chain_spec s;
  s.strategy = "pinned";
  s.options<pinned_spec>().upstream = upstream;
  return s;
}

bool contains(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

}  // namespace

TEST_CASE("meminfo is parsed in bytes") {
  const char* text =
      "MemTotal:       24576000 kB\n"
      "MemFree:        20000000 kB\n"
      "MemAvailable:   22000000 kB\n"
      "Buffers:          123456 kB\n";
  auto info = parse_meminfo(text);
  REQUIRE(info.has_value());
  CHECK_EQ(info->total_bytes, 24576000 * KiB);
  CHECK_EQ(info->available_bytes, 22000000 * KiB);
  // Missing or malformed fields give nothing rather than a wrong cap.
  CHECK(!parse_meminfo("MemTotal: 100 kB\n").has_value());
  CHECK(!parse_meminfo("MemTotal: x kB\nMemAvailable: 10 kB\n").has_value());
  CHECK(!parse_meminfo("MemTotal: 100 MB\nMemAvailable: 10 kB\n").has_value());
  CHECK(!parse_meminfo("MemTotalX: 100 kB\nMemAvailable: 10 kB\n").has_value());
  CHECK(!parse_meminfo("MemTotal: 99999999999999999999 kB\nMemAvailable: 10 kB\n").has_value());
  // This machine's (Linux): readable, available within total.
  auto here = read_host_memory_info();
  REQUIRE(here.has_value());
  CHECK(here->total_bytes > 0);
  CHECK(here->available_bytes <= here->total_bytes);
}

TEST_CASE("default cap is available less a tenth of total") {
  CHECK_EQ(default_pinned_cap({24 * GiB, 20 * GiB}), 20 * GiB - 24 * GiB / 10);
  CHECK_EQ(default_pinned_cap({24 * GiB, 2 * GiB}), std::uint64_t{0});  // less than a tenth free: nothing
  auto host = std::optional<host_memory_info>(host_memory_info{24 * GiB, 20 * GiB});
  pinned_cap c = decide_pinned_cap({}, host);
  CHECK_EQ(c.bytes, 20 * GiB - 24 * GiB / 10);
  CHECK(!c.explicit_cap);
  c = decide_pinned_cap({64 * MiB}, host);  // maxReservedBytes lowers it
  CHECK_EQ(c.bytes, 64 * MiB);
  CHECK(c.explicit_cap);
  c = decide_pinned_cap({100 * GiB}, host);  // but never raises it
  CHECK_EQ(c.bytes, 20 * GiB - 24 * GiB / 10);
  CHECK(!c.explicit_cap);
  c = decide_pinned_cap({64 * MiB}, std::nullopt);  // no /proc/meminfo: the explicit cap alone
  CHECK_EQ(c.bytes, 64 * MiB);
  try {
    decide_pinned_cap({}, std::nullopt);
    CHECK(false);
  } catch (const invalid_state& e) {
    CHECK(contains(e.what(), "maxReservedBytes"));
  }
}

TEST_CASE("pinned chain layers") {
  chain_spec s = pinned_spec_on(pinned_upstream::pinned);
  CHECK_EQ(join(chain_layers(s)), std::string("pinned pool"));
  CHECK_EQ(join(chain_layers(pinned_spec_on(pinned_upstream::host))), std::string("host pool"));
  s.limit_bytes = 1 << 20;
  s.fault_injection = fault_spec{3, std::nullopt};
  s.tracking_capacity = 16;
  CHECK_EQ(join(chain_layers(s)), std::string("pinned fault limit pool track"));
  CHECK_EQ(parse_strategy("pinned").name, std::string("pinned"));
  s = pinned_spec_on(pinned_upstream::host);
  s.options<pinned_spec>().options.large_segment_rounding = 0;
  try {
    build_chain(s);
    CHECK(false);
  } catch (const invalid_argument& e) {
    CHECK_EQ(e.argument(), std::string("largeSegmentRounding"));
  }
}

// The pool's rounding, not a power of two: 300 MiB + 1 B takes one 302 MiB segment (512 B rounding,
// large segments rounded to 2 MiB). PyTorch's pinned allocator would take 512 MiB.
TEST_CASE("host twin rounds finely") {
  resource_chain chain = build_chain(pinned_spec_on(pinned_upstream::host));
  memory_resource& top = chain.top();
  CHECK(top.kind() == memory_kind::host);
  const std::size_t bytes = 300 * MiB + 1;
  void* p = top.allocate(bytes);
  CHECK_EQ(top.stats().reserved_bytes, 302 * MiB);
  CHECK_EQ(top.stats().allocated_bytes, bytes);
  top.deallocate(p, bytes);
  void* q = top.allocate(200 * MiB);  // reuses the cached segment
  CHECK_EQ(q, p);
  CHECK_EQ(top.stats().upstream_alloc_count, std::uint64_t{1});
  top.deallocate(q, 200 * MiB);
}

TEST_CASE("host twin cap fails as out of memory and stays usable") {
  chain_spec s = pinned_spec_on(pinned_upstream::host);
  s.options<pinned_spec>().options.max_reserved_bytes = 8 * MiB;
  resource_chain chain = build_chain(s);
  memory_resource& top = chain.top();
  void* p = top.allocate(4 * MiB);
  CHECK_THROWS_AS(top.allocate(6 * MiB), out_of_memory);
  CHECK_EQ(top.stats().oom_count, std::uint64_t{1});
  CHECK_EQ(top.stats().allocated_bytes, 4 * MiB);
  top.deallocate(p, 4 * MiB);
  void* q = top.allocate(8 * MiB);  // the cached segment is released to make room
  top.deallocate(q, 8 * MiB);
}

TEST_CASE("pinned leaf on a gpu or says what is missing") {
  if (device_count() == 0) {
    try {
      build_chain(pinned_spec_on(pinned_upstream::pinned));
      CHECK(false);
    } catch (const invalid_state& e) {
      CHECK((contains(e.what(), "pinned") || contains(e.what(), "CUDA")));
    } catch (const cuda_error&) {
      // built with CUDA on a machine with no driver: the device check fails first
    }
    return;
  }
  pinned_host_resource leaf(0);
  MESSAGE("pinned cap here: " << leaf.describe_cap());
  CHECK(leaf.kind() == memory_kind::pinned);
  CHECK_EQ(leaf.device(), 0);
  void* p = leaf.allocate(MiB);
  std::vector<unsigned char> data(MiB, 7), back(MiB, 0);
  copy_to(p, memory_kind::pinned, data.data(), MiB, nullptr);
  copy_from(back.data(), p, memory_kind::pinned, MiB, nullptr);
  CHECK(back == data);
  CHECK_EQ(static_cast<unsigned char*>(p)[12345], static_cast<unsigned char>(7));  // the host sees it in place
  leaf.deallocate(p, MiB);
  CHECK_THROWS_AS(leaf.allocate(leaf.cap_bytes() + 1), out_of_memory);

  chain_spec s = pinned_spec_on(pinned_upstream::pinned);
  s.options<pinned_spec>().options.max_reserved_bytes = 8 * MiB;
  resource_chain chain = build_chain(s);
  memory_resource& top = chain.top();
  CHECK(top.kind() == memory_kind::pinned);
  void* a = top.allocate(4 * MiB);
  try {
    top.allocate(6 * MiB);
    CHECK(false);
  } catch (const out_of_memory& e) {
    CHECK(contains(e.what(), "would pin more than the host has available"));
  }
  top.deallocate(a, 4 * MiB);
  void* b = top.allocate(8 * MiB);
  top.deallocate(b, 8 * MiB);
}
