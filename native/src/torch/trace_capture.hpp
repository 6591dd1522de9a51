// The one call gpumem_malloc / gpumem_free make into the trace recorder (trace_capture.cpp).
#pragma once
#include <string>

#include "trace_recorder.hpp"

namespace gpumem::torch {

// Records an event when a trace is being recorded (GPUMEM_TRACE, read at the first call, or
// gpumem_trace_start); otherwise costs a few atomic loads. Never throws. `frame`: an allocation
// whose Python frame may be asked for (gpumem_trace_set_frame_hook) when the recording takes
// frames; false where the caller may hold a lock that a Python thread could wait for (a MemPool's
// segments: PyTorch's caching allocator asks for them under its own lock).
void trace_event(trace_action action, const void* ptr, long long bytes, int device, const void* stream,
                 bool frame = false) noexcept;

// Sets the message gpumem_last_error returns on this thread (gpumem_torch.cpp).
void set_last_error(std::string message) noexcept;

}  // namespace gpumem::torch
