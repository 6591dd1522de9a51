// Streams as the core sees them: an opaque handle. On a GPU it is a cudaStream_t (nullptr is the
// legacy default stream); over host memory it is only a key that separates free lists.
#pragma once

#include "gpumem/placement.hpp"

namespace gpumem {

using stream_handle = void*;

// Where memory lives, so that resources over an upstream know how to copy and order it. `pinned`
// is mapped pinned host memory (cudaHostAlloc): host memory that kernels read and write in place, so
// it is copied with cudaMemcpy and ordered with CUDA events like device memory; only `host` means
// plain host memory that no kernel may touch.
enum class memory_kind { host, device, managed, pinned };

}  // namespace gpumem
