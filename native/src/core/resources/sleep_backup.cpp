// The host memory holding one tag's kept content (sleep_engine.hpp's sleep_backup): the saved pieces
// forgotten, read and viewed by device address.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "sleep_engine.hpp"

namespace gpumem::detail {

namespace {

std::uintptr_t address(const void* p) noexcept { return reinterpret_cast<std::uintptr_t>(p); }

}  // namespace

std::uint64_t sleep_backup::saved_bytes() const noexcept {
  std::uint64_t total = 0;
  for (const piece& p : pieces_) total += p.bytes;
  return total;
}

void sleep_backup::forget(const void* addr, std::size_t bytes) noexcept {
  const std::uintptr_t lo = address(addr);
  const std::uintptr_t hi = lo + bytes;
  pieces_.erase(std::remove_if(pieces_.begin(), pieces_.end(),
                               [&](const piece& p) { return p.addr >= lo && p.addr + p.bytes <= hi; }),
                pieces_.end());
}

bool sleep_backup::read(const void* addr, std::size_t bytes, void* out) const noexcept {
  if (bytes == 0) return false;
  const std::uintptr_t lo = address(addr);
  const std::uintptr_t hi = lo + bytes;
  // The pieces are sorted by address: the first that ends past lo, then contiguous ones up to hi.
  const auto first = std::upper_bound(pieces_.begin(), pieces_.end(), lo,
                                      [](std::uintptr_t a, const piece& p) { return a < p.addr + p.bytes; });
  std::uintptr_t at = lo;
  for (auto p = first; at < hi; ++p) {
    if (p == pieces_.end() || p->addr > at) return false;  // a gap: not all of it was saved
    at = std::min<std::uintptr_t>(hi, p->addr + p->bytes);
  }
  at = lo;
  for (auto p = first; at < hi; ++p) {
    const std::uintptr_t end = std::min<std::uintptr_t>(hi, p->addr + p->bytes);
    std::memcpy(static_cast<std::byte*>(out) + (at - lo), p->host + (at - p->addr), end - at);
    at = end;
  }
  return true;
}

const void* sleep_backup::view(const void* addr, std::size_t bytes) const noexcept {
  if (bytes == 0) return nullptr;
  const std::uintptr_t lo = address(addr);
  const std::uintptr_t hi = lo + bytes;
  auto p = std::upper_bound(pieces_.begin(), pieces_.end(), lo,
                            [](std::uintptr_t a, const piece& q) { return a < q.addr + q.bytes; });
  if (p == pieces_.end() || p->addr > lo) return nullptr;
  const std::byte* start = p->host + (lo - p->addr);
  // Later pieces continue it where both the device and the host addresses run on.
  for (std::uintptr_t at = p->addr + p->bytes; at < hi; at = p->addr + p->bytes) {
    const auto prev = p++;
    if (p == pieces_.end() || p->addr != at || p->host != prev->host + prev->bytes) return nullptr;
  }
  return start;
}

}  // namespace gpumem::detail
