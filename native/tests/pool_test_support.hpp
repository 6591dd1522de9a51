// Helpers shared by the host-only tests of the pool and the adaptors: the KiB/MiB size units, a
// pointer's address as an integer, four distinct stream keys, a pool over host memory with the fake
// stream_ordering of fake_ordering.hpp (the test keeps its log to inspect and drive the events), and
// whether the pool made one stream wait on an event recorded on another.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "fake_ordering.hpp"
#include "gpumem/host_resource.hpp"
#include "gpumem/pool_resource.hpp"

namespace gpumem::test {

inline constexpr std::size_t KiB = 1024;
inline constexpr std::size_t MiB = 1024 * 1024;

inline std::uintptr_t addr(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

// Four streams for the cross-stream tests; any distinct non-null keys would do.
inline const stream_handle stream_a = stream_key(0xA0);
inline const stream_handle stream_b = stream_key(0xB0);
inline const stream_handle stream_c = stream_key(0xC0);
inline const stream_handle stream_d = stream_key(0xD0);

// A pool_resource over host memory whose stream ordering is a fake_ordering writing to `log`.
// Members are declared in construction order: the log and the host outlive the pool.
struct pool_fixture {
  explicit pool_fixture(pool_options options = {}) : pool(host, options, make_fake_ordering(log)) {}
  std::shared_ptr<fake_ordering_log> log = std::make_shared<fake_ordering_log>();
  host_resource host;
  pool_resource pool;
};

// Whether `waiter` was made to wait on an event recorded on `recorded_on`.
inline bool waited(const fake_ordering_log& log, stream_handle waiter, stream_handle recorded_on) {
  for (const auto& w : log.waits) {
    if (w.stream == waiter && w.event != nullptr && w.event->stream == recorded_on) return true;
  }
  return false;
}

}  // namespace gpumem::test
