/* gpumem plug-in ABI: a memory strategy as a shared library.
 *
 * A plug-in is a shared library (.so) that exports one C function,
 *
 *     const gpumem_plugin_v1* gpumem_plugin_get(void);
 *
 * returning a pointer to a table of functions that lives as long as the library is loaded
 * (a static const table). gpumem loads the library with dlopen(RTLD_NOW | RTLD_LOCAL), reads
 * `abi_version` first and refuses any other version than the one it was built for, then calls
 * `create` once per allocator and the other functions on the state it returned. After `destroy`
 * the library is closed (dlclose).
 *
 * Why one unversioned entry point returning a static table: a table needs no initialisation
 * call that could fail or run twice, and because the symbol's name does not change between
 * versions, a library built for another version is reported as "ABI version N, expected 1"
 * instead of an unhelpful "symbol not found". `abi_version` is the first member in every
 * version of the table, so it can always be read.
 *
 * This header is plain C (C89 types plus <stddef.h>/<stdint.h>), usable from C and C++, and it is
 * the only thing a plug-in needs from gpumem: no gpumem library is linked.
 *
 * Rules (every function):
 *  - Sizes are in bytes. `bytes` passed to allocate is never 0 (gpumem rejects 0 before calling).
 *  - Alignment: every pointer allocate returns must be aligned to GPUMEM_PLUGIN_ALIGNMENT (256)
 *    bytes. gpumem checks it and treats a misaligned pointer as a broken plug-in (an error, after
 *    giving the pointer back with deallocate).
 *  - Memory: for `device` >= 0 the memory must be usable by kernels on that CUDA device (device
 *    memory, managed memory, ...); for `device` == -1 it must be ordinary host memory that the
 *    CPU can read and write. During every call for a device >= 0, gpumem has made that device the
 *    current CUDA device (and restores the caller's afterwards).
 *  - Stream order (as CUDA's own allocator and RMM): `stream` is a cudaStream_t (NULL: the legacy
 *    default stream; over host memory only a key). allocate(s) returns memory usable by work
 *    queued on s from now on. deallocate(p, n, s) means work already queued on s may still use p:
 *    the plug-in may hand p out again at once to a request on s, but to a request on another
 *    stream only once that work has finished (e.g. after cudaStreamSynchronize, or an event
 *    recorded on s has completed). A plug-in that does not want to track this may simply reuse
 *    memory only on the stream it was freed on, or synchronise s before reusing.
 *  - gpumem checks every deallocate before the plug-in sees it: the pointer is one allocate
 *    returned on this state and not yet freed, and `bytes` is the size it was allocated with.
 *    A plug-in therefore never sees a double free, an unknown pointer or a wrong size.
 *  - Threads: calls on one state may come from several threads at once. The plug-in must be
 *    thread-safe, or set GPUMEM_PLUGIN_FLAG_SERIALIZE in `flags`, and gpumem then never makes
 *    two calls on the same state at the same time (one mutex per state). Different states are
 *    used independently.
 *  - Errors: allocate returns a GPUMEM_PLUGIN_* status. A failed allocate changes nothing and
 *    leaves the state usable (in particular after GPUMEM_PLUGIN_OUT_OF_MEMORY). Its message, if
 *    any, is what `last_error(state)` returns on the same thread right after the failed call.
 *    deallocate, trim, stats and destroy never fail.
 *  - No function may throw a C++ exception or call exit()/abort() for a recoverable failure:
 *    the library runs inside the caller's process (Node.js, Python).
 *  - Strings returned by name and last_error stay valid until the next call on the same state
 *    from the same thread; gpumem copies them at once.
 */
#ifndef GPUMEM_PLUGIN_H
#define GPUMEM_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this table layout. Any change to gpumem_plugin_v1 or gpumem_plugin_stats
 * (a member added, removed or changed) is a new version. */
#define GPUMEM_PLUGIN_ABI_VERSION 1u

/* The entry point's symbol name, for dlsym. */
#define GPUMEM_PLUGIN_ENTRY_POINT "gpumem_plugin_get"

/* The alignment every allocation must have. */
#define GPUMEM_PLUGIN_ALIGNMENT 256u

/* Status codes of allocate. */
#define GPUMEM_PLUGIN_OK 0               /* *out holds the allocation */
#define GPUMEM_PLUGIN_OUT_OF_MEMORY 1    /* the request cannot be met now; the state is still usable */
#define GPUMEM_PLUGIN_INVALID_ARGUMENT 2 /* the request can never be met (e.g. larger than the plug-in supports) */
#define GPUMEM_PLUGIN_ERROR 3            /* anything else (a CUDA error, ...) */

/* Bits of gpumem_plugin_v1.flags. */
#define GPUMEM_PLUGIN_FLAG_SERIALIZE 1u  /* not thread-safe: gpumem serialises calls on each state */

/* What a plug-in may report of itself (see gpumem_plugin_v1.stats). gpumem counts allocated
 * bytes, peaks, call counts and out-of-memory failures itself, exactly, so only what gpumem
 * cannot see is asked for. gpumem fills the struct with the defaults below before the call. */
typedef struct gpumem_plugin_stats {
  uint64_t reserved_bytes;       /* bytes taken from the driver/host and not given back (default: the allocated bytes) */
  uint64_t upstream_alloc_count; /* driver/host allocation calls made (default: one per allocation) */
  uint64_t upstream_free_count;  /* driver/host free calls made (default: one per deallocation) */
  int64_t largest_free_block;    /* cached free bytes in one piece; -1 when not known (default) */
} gpumem_plugin_stats;

typedef struct gpumem_plugin_v1 {
  /* GPUMEM_PLUGIN_ABI_VERSION as the plug-in was compiled. Always the first member. */
  uint32_t abi_version;
  /* GPUMEM_PLUGIN_FLAG_* bits. */
  uint32_t flags;

  /* Required. Makes a state for one allocator. `options` is the user's option string,
   * "key=value;key=value" (never NULL; "" when none was given); unknown keys or bad values should
   * be rejected. `device` is a CUDA device ordinal, or -1 for host memory. On failure returns NULL
   * after writing a NUL-terminated message of at most `error_len` bytes (including the NUL) into
   * `error`. */
  void* (*create)(const char* options, int device, char* error, size_t error_len);

  /* Required. Allocates `bytes` (> 0) for use on `stream`; on GPUMEM_PLUGIN_OK stores a
   * 256-byte aligned pointer in *out. Returns a GPUMEM_PLUGIN_* status. */
  int (*allocate)(void* state, size_t bytes, void* stream, void** out);

  /* Required. Gives back `ptr` (from allocate, with the size it was allocated with) in stream
   * order on `stream`. Never fails. */
  void (*deallocate)(void* state, void* ptr, size_t bytes, void* stream);

  /* Required. Releases everything the state holds, allocations not yet deallocated included,
   * and the state itself. Never fails. No other call on the state runs at the same time or later. */
  void (*destroy)(void* state);

  /* Optional (NULL allowed). The message of the calling thread's last failed allocate on this
   * state, or NULL/"" when there is none. */
  const char* (*last_error)(void* state);

  /* Optional. Fills in what the plug-in knows (see gpumem_plugin_stats). gpumem calls it when its
   * statistics are read and after each successful allocate (to follow the peak of reserved
   * bytes), so it should be cheap. */
  void (*stats)(void* state, gpumem_plugin_stats* out);

  /* Optional. Gives cached memory back to the driver/host, keeping at most `bytes_to_keep`
   * reserved where the plug-in can choose. Memory callers hold is never touched. */
  void (*trim)(void* state, size_t bytes_to_keep);

  /* Optional. A short name for messages, e.g. "slab". gpumem uses the library's file name when
   * NULL. */
  const char* (*name)(void* state);
} gpumem_plugin_v1;

/* The one symbol a plug-in exports. Mark it visible when building with -fvisibility=hidden. */
typedef const gpumem_plugin_v1* (*gpumem_plugin_get_fn)(void);

#if defined(__GNUC__)
#define GPUMEM_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define GPUMEM_PLUGIN_EXPORT
#endif

GPUMEM_PLUGIN_EXPORT const gpumem_plugin_v1* gpumem_plugin_get(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* GPUMEM_PLUGIN_H */
