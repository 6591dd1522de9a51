// The granule the host-twin tests of tiered and expandable map in: 64 KiB, so that a test can hold
// many granules in little memory.
#pragma once
#include <cstddef>

namespace gpumem::test {

inline constexpr std::size_t granule = 64 * 1024;

}  // namespace gpumem::test
