// Copies between a collective's buffer and host memory, for communicators whose transport lives
// outside the native core (the TCP communicator of @gpumem/distributed moves the bytes over
// sockets in JavaScript). One side is host memory; the other is host memory too (device -1) or
// memory on CUDA device `device`, copied in order on `stream` after the work queued there.
#pragma once
#include <cstdint>

#include "gpumem/stream.hpp"

namespace gpumem::comm {

// `count` f32 from `src` to `dst`; returns once the copy is done.
void stage_copy(float* dst, const float* src, std::uint64_t count, int device, stream_handle stream);

}  // namespace gpumem::comm
