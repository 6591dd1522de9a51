// A seeded byte pattern that tests write into memory and check later, to see that content survived
// a move, a sleep and wake or another thread's work.
#pragma once
#include <cstddef>
#include <cstdint>

namespace gpumem::test {

// Writes the pattern of `seed` over the `n` bytes at `p`.
inline void fill(void* p, std::size_t n, std::uint8_t seed) {
  auto* b = static_cast<std::uint8_t*>(p);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::uint8_t>(seed + i * 31);
}

// Whether the `n` bytes at `p` still hold the pattern of `seed`.
inline bool intact(const void* p, std::size_t n, std::uint8_t seed) {
  const auto* b = static_cast<const std::uint8_t*>(p);
  for (std::size_t i = 0; i < n; ++i) {
    if (b[i] != static_cast<std::uint8_t>(seed + i * 31)) return false;
  }
  return true;
}

}  // namespace gpumem::test
