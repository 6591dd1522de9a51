// Small kernels for GPU tests and benchmarks: fill memory, read it back as a checksum, and a
// long-running reader (spins for a given time before reading) for stream-ordering tests.
// Launch errors are thrown as cuda_error. All take a device (or managed) pointer of u32 values.
#pragma once
#include <cstddef>
#include <cstdint>

#include "gpumem/stream.hpp"

namespace gpumem::kernels {

void fill_u32(void* ptr, std::size_t count, std::uint32_t value, stream_handle stream);
// fill_u32 from a kernel on `device`, on its default stream, waiting for it: with memory of another
// device, the kernel reads and writes over a peer path (tests of the peerAccess option).
void fill_u32_on_device(int device, void* ptr, std::size_t count, std::uint32_t value);
// Spins for spin_ns nanoseconds on the GPU (0: not at all), then adds the sum of the values to
// *out (one u64 in device-visible memory).
void spin_then_sum_u32(const void* ptr, std::size_t count, std::uint64_t spin_ns, void* out, stream_handle stream);

}  // namespace gpumem::kernels
