/*
 * libgpumem_torch.so, continued: allocation traces, and the C interface of the seed's
 * uvm_allocator.so. The rest of the library's interface is gpumem_torch.h.
 *
 * Traces. Every gpumem_malloc (and uvm_malloc) that returns memory, every gpumem_free of a
 * non-NULL pointer, and every allocation that fails for lack of memory is recorded with its time,
 * size, pointer, stream, device and thread, while a trace is being recorded:
 *
 *   GPUMEM_TRACE=FILE       the whole process: recording starts at the library's first
 *                           allocation and the file is completed at exit. A FILE that cannot be
 *                           created is reported on stderr and the program runs without a trace.
 *   gpumem_trace_start(FILE) ... gpumem_trace_stop()   a part of a run (gpumem_torch.record()).
 *
 * FILE ending in ".csv" (any case): RMM's logging CSV (Thread,Time,Action,Pointer,Size,Stream);
 * anything else: gpumem's JSONL trace (docs/traces.md). Both are read by `gpumem replay`.
 * Zero-byte requests (answered with NULL, never freed) are not recorded.
 *
 * Memory is bounded (two buffers of 65536 events, 40 bytes each, and 1 MiB of text); a writer
 * thread writes full buffers; nothing is dropped (a caller waits when both buffers are full).
 * A child made by fork() records nothing.
 */
#ifndef GPUMEM_TORCH_TRACE_H
#define GPUMEM_TORCH_TRACE_H

#include "gpumem_torch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The trace file could not be created or written, a trace is already being recorded (start), or
 * none is (stop). */
#define GPUMEM_TORCH_ERR_TRACE 5

/* Starts recording to `path`. `workload_json`: NULL, "" or a JSON object, written as the JSONL
 * header's "workload". Returns 0, GPUMEM_TORCH_ERR_ARGUMENT (path NULL or empty, workload not an
 * object) or GPUMEM_TORCH_ERR_TRACE; the message is in gpumem_last_error. */
GPUMEM_TORCH_API int gpumem_trace_start(const char* path, const char* workload_json);

/* Writes what is buffered, completes the file and closes it. `events` (may be NULL) receives the
 * number of events the file holds. Returns 0, or GPUMEM_TORCH_ERR_TRACE when nothing was being
 * recorded or writing failed (gpumem_last_error says which). Also stops a GPUMEM_TRACE trace. */
GPUMEM_TORCH_API int gpumem_trace_stop(uint64_t* events);

/* 1 while a trace is being recorded, else 0. */
GPUMEM_TORCH_API int gpumem_trace_active(void);

/* The file of the current (or last) trace, "" if none. Valid until the calling thread's next
 * call of this function. */
GPUMEM_TORCH_API const char* gpumem_trace_path(void);

/* Events recorded by the current (or last) trace. */
GPUMEM_TORCH_API uint64_t gpumem_trace_events(void);

/*
 * Python frames (gpumem_torch.record(path, frames=True)). The library does not link Python: the
 * Python package registers a hook, which the library calls for each allocation served while a
 * trace started with gpumem_trace_start_frames is being recorded, and never otherwise (not for
 * frees, not for a MemPool's segments, which PyTorch asks for under a lock of its own). The hook
 * gets the recording's number, takes the GIL (a ctypes callback does), finds the innermost user
 * frame and returns its tag from gpumem_trace_frame_tag(recording, "file:line:function"); 0 is
 * "other". The library keeps the names (at most 1024 per trace, each cut to 200 bytes) and the
 * bytes each tag allocated; gpumem_trace_stop writes into the JSONL header's "tags" the
 * `named_frames` tags that allocated the most bytes, and "other" for the rest, as `gpumem replay`
 * does with a PyTorch snapshot's frames.
 */
typedef uint32_t (*gpumem_trace_frame_hook)(uint64_t recording);

/* Sets (or, with NULL, clears) the frame hook. The caller keeps the function alive while set. */
GPUMEM_TORCH_API void gpumem_trace_set_frame_hook(gpumem_trace_frame_hook hook);

/* gpumem_trace_start, with frame tags: `named_frames` (0 to 64; 0 is gpumem_trace_start) is how
 * many the header names. GPUMEM_TORCH_ERR_ARGUMENT for more than 64, or a ".csv" path (RMM's CSV
 * has no tags). */
GPUMEM_TORCH_API int gpumem_trace_start_frames(const char* path, const char* workload_json, uint32_t named_frames);

/* 1 while a trace that takes frame tags is being recorded, else 0. */
GPUMEM_TORCH_API int gpumem_trace_frames_active(void);

/* The tag of frame `name` in recording `recording` (the hook's argument): 1 or more, or 0 when
 * that recording has ended, takes no frames, or holds 1024 names already. Thread-safe. */
GPUMEM_TORCH_API uint32_t gpumem_trace_frame_tag(uint64_t recording, const char* name);

/* Records `count` allocations of `bytes` on device 0, each followed by its free, through the
 * path gpumem_malloc and gpumem_free take (the frame hook included), without allocating: the
 * pointers are made up; nothing is recorded when no trace is. For tests and benchmarks of the
 * trace on a machine without a GPU. Returns 0, or GPUMEM_TORCH_ERR_ARGUMENT for `bytes` 0 or
 * past 2^40. */
GPUMEM_TORCH_API int gpumem_trace_simulate(uint64_t count, uint64_t bytes);

/*
 * The seed's allocator library (uvm_allocator.so) under its own names, so a program written for
 * it runs unchanged with this library copied (or linked) as uvm_allocator.so. The allocation
 * functions are gpumem_malloc / gpumem_free (the strategy of GPUMEM_ALLOCATOR, default expandable; the
 * same behaviour on failure: see GPUMEM_OOM). The statistics are gpumem_stats' summed over the
 * devices in use (for one GPU, that device's numbers).
 */
GPUMEM_TORCH_API void* uvm_malloc(ssize_t size, int device, gpumem_stream_t stream);
GPUMEM_TORCH_API void uvm_free(void* ptr, ssize_t size, int device, gpumem_stream_t stream);
GPUMEM_TORCH_API size_t uvm_get_allocated_bytes(void);      /* allocated_bytes */
GPUMEM_TORCH_API size_t uvm_get_peak_allocated_bytes(void); /* peak_allocated_bytes */
GPUMEM_TORCH_API uint64_t uvm_get_num_allocs(void);         /* alloc_count */
GPUMEM_TORCH_API uint64_t uvm_get_num_frees(void);          /* free_count */
GPUMEM_TORCH_API void uvm_reset_peak_stats(void);           /* gpumem_reset_peak on every device */

#ifdef __cplusplus
}
#endif

#endif /* GPUMEM_TORCH_TRACE_H */
