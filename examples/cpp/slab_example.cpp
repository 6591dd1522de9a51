// Runs the slab_resource example over host memory: host_resource -> slab_resource. Allocates and
// frees, prints statistics, and checks the rules every gpumem strategy follows (validation before
// any change, out_of_memory with the requested size and statistics, usable afterwards). Exits
// non-zero if a check fails.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gpumem/errors.hpp"
#include "gpumem/host_resource.hpp"
#include "gpumem/limiting_adaptor.hpp"
#include "slab_resource.hpp"

using gpumem::examples::slab_options;
using gpumem::examples::slab_resource;

namespace {

int failures = 0;

#define CHECK(cond)                                                        \
  do {                                                                     \
    if (!(cond)) {                                                         \
      std::fprintf(stderr, "%s:%d: FAILED: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                          \
    }                                                                      \
  } while (0)

// Runs `f`, expecting gpumem::invalid_argument of `kind` naming `argument`.
template <class F>
void expect_invalid(F f, gpumem::invalid_argument::kind kind, const std::string& argument, const char* what) {
  try {
    f();
    std::fprintf(stderr, "FAILED: %s did not throw\n", what);
    ++failures;
  } catch (const gpumem::invalid_argument& e) {
    std::printf("  %-28s -> invalid_argument(%s): %s\n", what, e.argument().c_str(), e.what());
    CHECK(e.error_kind() == kind);
    CHECK(e.argument() == argument);
  }
}

void print(const char* label, const gpumem::resource_stats& s) {
  std::printf(
      "%-22s allocated %9llu  reserved %9llu  allocs %5llu  frees %5llu  upstream +%llu/-%llu  segments %llu  oom %llu\n",
      label, static_cast<unsigned long long>(s.allocated_bytes), static_cast<unsigned long long>(s.reserved_bytes),
      static_cast<unsigned long long>(s.alloc_count), static_cast<unsigned long long>(s.free_count),
      static_cast<unsigned long long>(s.upstream_alloc_count), static_cast<unsigned long long>(s.upstream_free_count),
      static_cast<unsigned long long>(s.segment_count), static_cast<unsigned long long>(s.oom_count));
}

void many_small_allocations() {
  std::printf("many same-size allocations\n");
  gpumem::host_resource host;
  slab_resource slabs(host);  // 256 B .. 64 KiB classes, 1 MiB slabs

  std::vector<void*> blocks;
  for (int i = 0; i < 10000; ++i) blocks.push_back(slabs.allocate(200));  // the 256 B class: 4096 per slab
  print("10000 x 200 B", slabs.stats());
  CHECK(slabs.stats().allocated_bytes == 10000u * 200u);
  CHECK(slabs.stats().upstream_alloc_count == 3);  // ceil(10000 / 4096) slabs
  CHECK(host.stats().alloc_count == 3);
  for (void* p : blocks) CHECK(reinterpret_cast<std::uintptr_t>(p) % 256 == 0);

  std::memset(blocks[0], 0xab, 200);  // host memory: usable directly
  std::memset(blocks[9999], 0xcd, 200);
  CHECK(static_cast<unsigned char*>(blocks[0])[199] == 0xab);
  CHECK(slabs.allocation_size(blocks[42]) == 200);

  for (void* p : blocks) slabs.deallocate(p, 200);
  print("all freed", slabs.stats());
  CHECK(slabs.stats().allocated_bytes == 0);
  CHECK(slabs.stats().reserved_bytes == 3u << 20);  // slabs are kept

  for (int i = 0; i < 10000; ++i) blocks[static_cast<std::size_t>(i)] = slabs.allocate(256);
  print("10000 x 256 B again", slabs.stats());
  CHECK(slabs.stats().upstream_alloc_count == 3);  // reused: no upstream call

  void* large = slabs.allocate(1 << 20);  // above the largest class: straight to the upstream
  print("+ one 1 MiB", slabs.stats());
  CHECK(slabs.stats().upstream_alloc_count == 4);
  slabs.deallocate(large, 1 << 20);
  CHECK(slabs.stats().upstream_free_count == 1);

  for (std::size_t i = 0; i < 5000; ++i) slabs.deallocate(blocks[i], 256);
  slabs.trim();  // gives back only slabs with no live block
  print("half freed, trimmed", slabs.stats());
  CHECK(slabs.stats().upstream_free_count == 2);  // the first slab held blocks 0..4095 only
  for (std::size_t i = 5000; i < 10000; ++i) slabs.deallocate(blocks[i], 256);
  slabs.trim();
  print("all freed, trimmed", slabs.stats());
  CHECK(slabs.stats().reserved_bytes == 0);
  CHECK(host.stats().allocated_bytes == 0);
}

void error_paths() {
  std::printf("error paths\n");
  gpumem::host_resource host;
  slab_resource slabs(host);
  void* keep = slabs.allocate(1000);
  const gpumem::resource_stats before = slabs.stats();
  using kind = gpumem::invalid_argument::kind;

  expect_invalid([&] { slabs.allocate(0); }, kind::range, "bytes", "allocate(0)");
  expect_invalid([&] { slabs.deallocate(static_cast<char*>(keep) + 256, 1000); }, kind::type, "ptr", "unknown pointer");
  expect_invalid([&] { slabs.deallocate(keep, 999); }, kind::range, "bytes", "wrong size");
  void* once = slabs.allocate(1000);
  slabs.deallocate(once, 1000);
  const gpumem::resource_stats after_free = slabs.stats();
  expect_invalid([&] { slabs.deallocate(once, 1000); }, kind::type, "ptr", "double free");
  expect_invalid([&] { slabs.record_stream(once, nullptr); }, kind::type, "ptr", "record_stream of a freed block");
  expect_invalid([&] { slab_resource bad(host, slab_options{{300}, 1 << 20}); },
                 kind::range, "size_classes", "a size class not of 256");
  CHECK(slabs.stats().allocated_bytes == before.allocated_bytes);
  CHECK(slabs.stats().free_count == after_free.free_count);
  CHECK(slabs.allocation_size(keep) == 1000);
  slabs.deallocate(keep, 1000);
  CHECK(slabs.stats().allocated_bytes == 0);
}

void out_of_memory() {
  std::printf("out of memory\n");
  gpumem::host_resource host;
  gpumem::limiting_adaptor limited(host, 1 << 20);  // room for one slab
  slab_resource slabs(limited);
  void* small = slabs.allocate(100);  // takes the one slab of the 256 B class
  const gpumem::resource_stats before = slabs.stats();
  try {
    slabs.allocate(3000);  // the 4 KiB class needs a slab of its own
    std::fprintf(stderr, "FAILED: allocate(3000) past the limit did not throw\n");
    ++failures;
  } catch (const gpumem::out_of_memory& e) {
    std::printf("  allocate(3000) past the limit -> out_of_memory: %s\n", e.what());
    CHECK(e.requested_bytes() == 3000);
    CHECK(e.stats().allocated_bytes == 100);
    CHECK(e.stats().oom_count == 1);
  }
  const gpumem::resource_stats after = slabs.stats();
  print("after the failure", after);
  CHECK(after.oom_count == before.oom_count + 1);
  CHECK(after.allocated_bytes == before.allocated_bytes);
  CHECK(after.reserved_bytes == before.reserved_bytes);
  CHECK(limited.used() == 1u << 20);  // the limiter rolled its accounting back

  void* again = slabs.allocate(200);  // still usable: the 256 B slab has room
  CHECK(again != nullptr);
  slabs.deallocate(again, 200);
  slabs.deallocate(small, 100);
  slabs.trim();
  CHECK(limited.used() == 0);
}

void destructor_returns_everything() {
  std::printf("destructor\n");
  gpumem::host_resource host;
  {
    slab_resource slabs(host);
    slabs.allocate(100);
    slabs.allocate(5000);
    slabs.allocate(100000);  // large
    CHECK(host.stats().allocated_bytes > 0);
  }  // blocks still live: the destructor gives every slab and large allocation back
  print("host after", host.stats());
  CHECK(host.stats().allocated_bytes == 0);
  CHECK(host.stats().reserved_bytes == 0);
}

}  // namespace

int main() {
  many_small_allocations();
  error_paths();
  out_of_memory();
  destructor_returns_everything();
  if (failures != 0) {
    std::fprintf(stderr, "slab_example: %d check(s) failed\n", failures);
    return 1;
  }
  std::printf("slab_example: all checks passed\n");
  return 0;
}
