// plugin_resource (gpumem/plugin_resource.hpp) over host memory: the example slab library
// (examples/cpp) and a minimal C library (minimal_plugin.c). Exact statistics from gpumem's own
// accounting, the library's reserved bytes and upstream counts, status codes mapped to the typed
// errors, bad frees rejected before the library sees them, every loading failure an error naming
// the library, the chain builder's layers over a plug-in, and calls from several threads.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "gpumem/chain_builder.hpp"
#include "gpumem/errors.hpp"
#include "gpumem/plugin_resource.hpp"
#include "gpumem/strategy_registry.hpp"

using namespace gpumem;

namespace {

const std::string slab_library = GPUMEM_EXAMPLE_SLAB;
const std::string minimal_library = GPUMEM_MINIMAL_PLUGIN;
const std::string wrong_abi_library = GPUMEM_WRONG_ABI_PLUGIN;

plugin_options slab(std::string options = "") { return plugin_options{slab_library, std::move(options), -1}; }

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The message of the error that constructing a plugin_resource throws ("" when none), and the
// argument an invalid_argument names.
std::string load_error(const plugin_options& o, std::string* argument = nullptr) {
  try {
    plugin_resource r(o);
  } catch (const invalid_argument& e) {
    if (argument) *argument = e.argument();
    return e.what();
  } catch (const error& e) {
    if (argument) argument->clear();
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("allocates aligned host memory with exact stats") {
  plugin_resource r(slab());
  CHECK_EQ(r.plugin_name(), std::string("slab"));
  CHECK(r.kind() == memory_kind::host);
  CHECK_EQ(r.device(), -1);
  std::vector<void*> blocks;
  for (int i = 0; i < 100; ++i) blocks.push_back(r.allocate(200));
  for (void* p : blocks) CHECK_EQ(reinterpret_cast<std::uintptr_t>(p) % 256, std::uintptr_t(0));
  std::memset(blocks[0], 0xab, 200);  // host memory: usable directly
  CHECK_EQ(static_cast<unsigned char*>(blocks[0])[199], static_cast<unsigned char>(0xab));
  CHECK_EQ(r.allocation_size(blocks[7]), std::size_t(200));
  resource_stats s = r.stats();
  CHECK_EQ(s.allocated_bytes, std::uint64_t(20000));
  CHECK_EQ(s.alloc_count, std::uint64_t(100));
  CHECK_EQ(s.reserved_bytes, std::uint64_t(1) << 20);  // the library's: one 1 MiB slab
  CHECK_EQ(s.peak_reserved_bytes, std::uint64_t(1) << 20);
  CHECK_EQ(s.upstream_alloc_count, std::uint64_t(1));
  CHECK_EQ(s.largest_free_block, std::int64_t(256));
  void* large = r.allocate(3 << 20);  // above the largest class: its own upstream allocation
  CHECK_EQ(r.stats().upstream_alloc_count, std::uint64_t(2));
  r.deallocate(large, 3 << 20);
  s = r.stats();
  CHECK_EQ(s.upstream_free_count, std::uint64_t(1));
  CHECK_EQ(s.peak_reserved_bytes, std::uint64_t(4) << 20);
  CHECK_EQ(s.peak_allocated_bytes, std::uint64_t(20000 + (3 << 20)));
  r.reset_peak();
  CHECK_EQ(r.stats().peak_reserved_bytes, std::uint64_t(1) << 20);
  CHECK_EQ(r.stats().peak_allocated_bytes, std::uint64_t(20000));
  for (void* p : blocks) r.deallocate(p, 200);
  CHECK_EQ(r.stats().allocated_bytes, std::uint64_t(0));
  CHECK_EQ(r.stats().free_count, std::uint64_t(101));
  CHECK_EQ(r.stats().reserved_bytes, std::uint64_t(1) << 20);  // the slab is kept
  r.trim(0);
  CHECK_EQ(r.stats().reserved_bytes, std::uint64_t(0));
}

TEST_CASE("bad frees are rejected before the library sees them") {
  plugin_resource r(slab());
  void* keep = r.allocate(1000);
  const resource_stats before = r.stats();
  REQUIRE_THROWS_AS(r.deallocate(static_cast<char*>(keep) + 256, 1000), invalid_argument);
  REQUIRE_THROWS_AS(r.deallocate(keep, 999), invalid_argument);
  void* once = r.allocate(1000);
  r.deallocate(once, 1000);
  REQUIRE_THROWS_AS(r.deallocate(once, 1000), invalid_argument);  // a double free
  CHECK_THROWS_AS(r.allocate(0), invalid_argument);
  CHECK_EQ(r.stats().allocated_bytes, before.allocated_bytes);
  CHECK_EQ(r.allocation_size(keep), std::size_t(1000));
  r.deallocate(keep, 1000);
  CHECK_EQ(r.stats().allocated_bytes, std::uint64_t(0));
}

TEST_CASE("out of memory is typed and leaves the resource usable") {
  plugin_resource r(slab("max_reserved=1MiB"));
  void* small = r.allocate(100);  // the one slab of the 256 B class
  try {
    r.allocate(3000);  // the 4 KiB class needs a slab of its own
    FAIL_CHECK("allocate past max_reserved did not throw");
  } catch (const out_of_memory& e) {
    CHECK_EQ(e.requested_bytes(), std::uint64_t(3000));
    CHECK_EQ(e.stats().allocated_bytes, std::uint64_t(100));
    CHECK_EQ(e.stats().oom_count, std::uint64_t(1));
    CHECK(contains(e.what(), "plugin 'slab' (" + slab_library + ")"));
    CHECK(contains(e.what(), "max_reserved"));
  }
  CHECK_THROWS_AS(r.allocate(std::size_t(1) << 52), out_of_memory);  // more than any host has
  CHECK_EQ(r.stats().oom_count, std::uint64_t(2));
  void* again = r.allocate(200);  // the 256 B slab still has room
  r.deallocate(again, 200);
  r.deallocate(small, 100);
  CHECK_EQ(r.stats().allocated_bytes, std::uint64_t(0));
}

TEST_CASE("a library path that is not a regular file is refused before dlopen, which would block on a FIFO") {
  char dir_template[] = "/tmp/gpumem-plugin-fifo-XXXXXX";
  REQUIRE(mkdtemp(dir_template) != nullptr);
  const std::string fifo = std::string(dir_template) + "/lib.so";
  REQUIRE_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::string argument;
  std::string e = load_error(plugin_options{fifo, "", -1}, &argument);
  CHECK(contains(e, "plugin library '" + fifo + "': is a named pipe (FIFO), not a regular file"));
  CHECK_EQ(argument, std::string("library"));
  CHECK(contains(load_error(plugin_options{"/dev/zero", "", -1}), "'/dev/zero': is a character device, not a regular file"));
  CHECK(contains(load_error(plugin_options{dir_template, "", -1}), "is a folder, not a regular file"));
  ::unlink(fifo.c_str());
  ::rmdir(dir_template);
}

TEST_CASE("loading failures name the library and the cause") {
  std::string argument;
  std::string e = load_error(plugin_options{"/nonexistent/libnothing.so", "", -1}, &argument);
  CHECK(contains(e, "'/nonexistent/libnothing.so'"));
  CHECK(contains(e, "cannot be loaded"));
  CHECK_EQ(argument, std::string("library"));
  e = load_error(plugin_options{"libm.so.6", "", -1});  // a library, but not a plug-in
  CHECK(contains(e, "'libm.so.6'"));
  CHECK(contains(e, "does not export gpumem_plugin_get"));
  e = load_error(plugin_options{wrong_abi_library, "", -1}, &argument);
  CHECK(contains(e, wrong_abi_library));
  CHECK(contains(e, "ABI version 99, but this gpumem supports version 1"));
  CHECK_EQ(argument, std::string("library"));
  e = load_error(plugin_options{"", "", -1});
  CHECK(contains(e, "non-empty path for library"));
  e = load_error(slab("slab_bytes=12;"), &argument);
  CHECK(contains(e, slab_library));
  CHECK(contains(e, "positive multiple of 256 for slab_bytes"));
  CHECK_EQ(argument, std::string("options"));
  e = load_error(slab("colour=blue"));
  CHECK(contains(e, "unknown option 'colour'"));
  e = load_error(plugin_options{minimal_library, "", 0});
  CHECK(!e.empty());  // host memory only (or, in a build without CUDA, gpumem refuses device 0)
}

TEST_CASE("status codes map to typed errors") {
  SUBCASE("1: out of memory") {
    plugin_resource r(plugin_options{minimal_library, "fail=1", -1});
    CHECK_THROWS_AS(r.allocate(64), out_of_memory);
    CHECK_EQ(r.stats().oom_count, std::uint64_t(1));
  }
  SUBCASE("2: invalid argument, with the library's message") {
    plugin_resource r(plugin_options{minimal_library, "fail=2", -1});
    try {
      r.allocate(64);
      FAIL_CHECK("status 2 did not throw");
    } catch (const invalid_argument& e) {
      CHECK_EQ(e.argument(), std::string("bytes"));
      CHECK(contains(e.what(), "told to fail"));  // the library's last_error
    }
  }
  SUBCASE("3 and unknown codes: invalid state") {
    plugin_resource r(plugin_options{minimal_library, "fail=3", -1});
    CHECK_THROWS_AS(r.allocate(64), invalid_state);
    plugin_resource unknown(plugin_options{minimal_library, "fail=42", -1});
    try {
      unknown.allocate(64);
    } catch (const invalid_state& e) {
      CHECK(contains(e.what(), "unknown status 42"));
    }
    CHECK_EQ(unknown.stats().allocated_bytes, std::uint64_t(0));
  }
  SUBCASE("a misaligned pointer: invalid state") {
    plugin_resource r(plugin_options{minimal_library, "misalign=1", -1});
    try {
      r.allocate(64);
      FAIL_CHECK("a misaligned pointer was accepted");
    } catch (const invalid_state& e) {
      CHECK(contains(e.what(), "not aligned to 256 bytes"));
    }
    CHECK_EQ(r.stats().allocated_bytes, std::uint64_t(0));
  }
}

TEST_CASE("without library stats gpumem counts stand") {
  plugin_resource r(plugin_options{minimal_library, "", -1});
  CHECK(r.plugin_name().find("minimal") != std::string::npos);  // the file name
  void* p = r.allocate(1000);
  const resource_stats s = r.stats();
  CHECK_EQ(s.allocated_bytes, std::uint64_t(1000));
  CHECK_EQ(s.reserved_bytes, std::uint64_t(1000));
  CHECK_EQ(s.upstream_alloc_count, std::uint64_t(1));
  CHECK_EQ(s.largest_free_block, std::int64_t(-1));
  r.trim(0);  // no trim in the table: nothing to do
  r.deallocate(p, 1000);
  CHECK_EQ(r.stats().upstream_free_count, std::uint64_t(1));
}

TEST_CASE("chain builder puts the common layers over the plugin") {
  chain_spec s;
  s.strategy = "plugin";
  s.device = -1;
  s.options<plugin_spec>().library = slab_library;
  s.limit_bytes = 2 << 20;
  s.fault_injection = fault_spec{std::nullopt, std::uint64_t(64) << 20};
  s.tracking_capacity = 16;
  std::string layers;
  for (const auto& n : chain_layers(s)) layers += (layers.empty() ? "" : " ") + n;
  CHECK_EQ(layers, std::string("plugin fault limit track"));
  resource_chain chain = build_chain(s);
  CHECK(chain.top().kind() == memory_kind::host);
  void* p = chain.top().allocate(1 << 20);
  CHECK_THROWS_AS(chain.top().allocate(3 << 20), out_of_memory);  // over the limit
  chain.top().deallocate(p, 1 << 20);
  CHECK_EQ(chain.tracker->events(false).size(), std::size_t(3));

  s.options<plugin_spec>().library.clear();
  try {
    build_chain(s);
    FAIL_CHECK("an empty library was accepted");
  } catch (const invalid_argument& e) {
    CHECK_EQ(e.argument(), std::string("library"));
  }
  s.options<plugin_spec>().library = slab_library;
  s.device = -2;
  CHECK_THROWS_AS(build_chain(s), invalid_argument);
  // 'native', the strategy's older name, still builds it.
  CHECK_EQ(parse_strategy("native").name, std::string("plugin"));
  s.device = -1;
  s.strategy = "native";
  layers.clear();
  for (const auto& n : chain_layers(s)) layers += (layers.empty() ? "" : " ") + n;
  CHECK_EQ(layers, std::string("plugin fault limit track"));
  resource_chain by_alias = build_chain(s);
  CHECK(by_alias.top().kind() == memory_kind::host);
}

TEST_CASE("calls from several threads") {
  for (const std::string& library : {slab_library, minimal_library}) {  // thread-safe, and serialised by gpumem
    plugin_resource r(plugin_options{library, "", -1});
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        std::vector<void*> mine;
        for (int i = 0; i < 2000; ++i) {
          const std::size_t bytes = 64 + static_cast<std::size_t>((i * 37 + t) % 5000);
          void* p = r.allocate(bytes);
          static_cast<unsigned char*>(p)[0] = static_cast<unsigned char>(t);
          mine.push_back(p);
          if (i % 3 == 2) {
            void* q = mine.front();
            mine.erase(mine.begin());
            if (static_cast<unsigned char*>(q)[0] != static_cast<unsigned char>(t)) ++failures;
            r.deallocate(q, r.allocation_size(q));
          }
        }
        for (void* q : mine) r.deallocate(q, r.allocation_size(q));
      });
    }
    for (auto& th : threads) th.join();
    CHECK_EQ(failures.load(), 0);
    CHECK_EQ(r.stats().allocated_bytes, std::uint64_t(0));
    CHECK_EQ(r.stats().alloc_count, std::uint64_t(8000));
  }
}
