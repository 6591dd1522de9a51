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
 * The seed's allocator library (uvm_allocator.so) under its own names, so a program written for
 * it runs unchanged with this library copied (or linked) as uvm_allocator.so. The allocation
 * functions are gpumem_malloc / gpumem_free (the strategy of GPUMEM_ALLOCATOR, default pool; the
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
