// Streams as the core sees them: an opaque handle. On a GPU it is a cudaStream_t (nullptr is the
// legacy default stream); over host memory it is only a key that separates free lists.
#pragma once

namespace gpumem {

using stream_handle = void*;

// Where memory lives, so that resources over an upstream know how to copy and order it.
enum class memory_kind { host, device, managed };

// A prefetch destination.
enum class location { device, host };

}  // namespace gpumem
