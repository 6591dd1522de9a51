// bf16 as the trainer stores it: the upper 16 bits of an f32. Shared by the CPU references and the
// kernels, so both round and widen the same way.
#pragma once
#include <cstdint>

#include "rng.hpp"  // GPUMEM_HD

namespace gpumem::ops {

// The bf16 bits of the f32 with bits `u`, rounded to nearest even; a NaN stays a (quiet) NaN.
GPUMEM_HD std::uint16_t bf16_from_f32_bits(std::uint32_t u) {
  return (u & 0x7fffffffu) > 0x7f800000u ? std::uint16_t((u >> 16) | 0x40u)
                                         : std::uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// The f32 bits of a bf16 value.
GPUMEM_HD std::uint32_t f32_bits_from_bf16(std::uint16_t b) { return std::uint32_t(b) << 16; }

}  // namespace gpumem::ops
