/*
 * libgpumem_torch.so: gpumem's strategies as a PyTorch CUDAPluggableAllocator, with the memory
 * statistics a pluggable allocator otherwise lacks (pytorch/pytorch#133281).
 *
 *   import torch
 *   alloc = torch.cuda.memory.CUDAPluggableAllocator(
 *       "native/build/Release/libgpumem_torch.so", "gpumem_malloc", "gpumem_free")
 *   torch.cuda.memory.change_current_allocator(alloc)   # before CUDA is initialised
 *
 * or, with the statistics, the gpumem_torch Python package (`gpumem_torch.enable("pool")`).
 *
 * Configuration: environment variables, read by gpumem_init, or by the first gpumem_malloc if
 * nobody called gpumem_init, and kept from the first reading that is valid (a bad value is
 * reported and nothing is kept: the next call reads the environment again). A value that is set
 * but not empty must be valid; an empty value counts as unset.
 *
 *   GPUMEM_ALLOCATOR                cuda | uvm | pool | async | expandable | pinned | tiered |
 *                                   plugin | plugin:PATH    (default expandable; case-insensitive)
 *     cuda  cudaMalloc / cudaFree for every tensor (cudaFree synchronises the device).
 *     uvm   cudaMallocManaged, prefetched to the device on the allocating stream, capped by
 *           GPUMEM_UVM_LIMIT.
 *     pool  gpumem's caching block pool over cudaMalloc (per-stream free lists, events for
 *           cross-stream reuse, release-and-retry on out-of-memory).
 *     async cudaMallocFromPoolAsync on a cudaMemPool_t owned by the library.
 *     expandable  gpumem's expandable segments on CUDA virtual memory.
 *     pinned      a pool over mapped pinned host memory (kernels read and write it in place).
 *     tiered      device memory up to a budget, then mapped pinned host memory; every block
 *                 rounded to a 2 MiB granule. See GPUMEM_TIERED_* and gpumem_set_thread_placement.
 *     plugin      a strategy built as a shared library against gpumem/plugin.h, named by
 *                 GPUMEM_PLUGIN_LIBRARY; plugin:PATH (deprecated) is the same with the path in the
 *                 name. 'native', its older name, is still read, with a warning (stderr, or
 *                 gpumem_set_warning_handler's handler), and so is GPUMEM_NATIVE_LIBRARY for
 *                 GPUMEM_PLUGIN_LIBRARY.
 *   GPUMEM_PLUGIN_LIBRARY           PATH   (plugin; given to dlopen as is)
 *   GPUMEM_PLUGIN_OPTIONS           key=value;key=value   (plugin / plugin:PATH; passed as is)
 *   GPUMEM_TIERED_DEVICE_BUDGET     SIZE   (tiered; device bytes held, live and cached; default:
 *                                   the device's free memory less 1 GiB; 0: all on the host)
 *   GPUMEM_TIERED_HOST_BUDGET       SIZE   (tiered; pinned host bytes; never more than
 *                                   MemAvailable less 10% of MemTotal, which a value only lowers)
 *   GPUMEM_TIERED_PLACEMENT         auto | device | host    (tiered; default auto: the device
 *                                   while its budget allows, then the host)
 *   GPUMEM_EXPANDABLE_UNMAP_IDLE_BEFORE_GROWTH  0 | 1  (expandable; default 0: before mapping past
 *                                   the peak of reserved bytes, unmap idle granules first)
 *   GPUMEM_UVM_PREFETCH             0 | 1          (uvm; default 1: prefetch every allocation)
 *   GPUMEM_UVM_ADVISE               none | device | host                  (uvm; default none)
 *                                   device: cudaMemAdviseSetPreferredLocation(device) and
 *                                   SetAccessedBy(device); host: preferred location the host,
 *                                   accessed by the device (pages stay in host memory, mapped).
 *   GPUMEM_UVM_LIMIT                free | none | SIZE                   (uvm; default free)
 *                                   The most managed memory the library hands out per device.
 *                                   free: the device's free memory when the strategy is created,
 *                                   less 512 MiB; none: no cap (oversubscription allowed).
 *   GPUMEM_ASYNC_RELEASE_THRESHOLD  SIZE   (async; freed bytes the pool keeps at a sync point;
 *                                   default: keep everything)
 *   GPUMEM_POOL_MAX_RESERVED        SIZE   (pool, pinned; cap on what the pool takes from
 *                                   cudaMalloc / pins; default: no cap)
 *   GPUMEM_OOM                      raise | null                         (default raise)
 *                                   What gpumem_malloc does when memory runs out; see
 *                                   gpumem_malloc below.
 *
 *   SIZE: a byte count, a non-negative decimal integer with an optional suffix KiB, MiB, GiB or
 *   TiB (powers of 1024, the unit's case ignored): 1048576, 512MiB, 4GiB, 64KiB (gpumem/sizes.hpp).
 *   Decimal-looking units (4GB, 4G) are refused, the message naming the binary spelling (4GiB).
 *
 * Every variable is validated, whichever strategy is chosen. A bad value makes gpumem_init
 * return GPUMEM_TORCH_ERR_CONFIG with a message naming the variable, the value and the accepted
 * form (gpumem_last_error).
 *
 * Instances: number 0 is the one the environment configures (gpumem_malloc / gpumem_free, also
 * gpumem_malloc_0 / gpumem_free_0); gpumem_instance_create makes numbers 1 to
 * GPUMEM_TORCH_MAX_INSTANCES - 1 from a configuration text, each served by its own entry points
 * gpumem_malloc_<n> / gpumem_free_<n>, so that PyTorch can hold several allocators with different
 * strategies (a torch.cuda.MemPool each). gpumem_mempool_malloc_<n> is gpumem_malloc_<n> that returns
 * NULL on failure whatever GPUMEM_OOM says: the entry point for a torch.cuda.MemPool, whose caching
 * allocator checks the pointer and raises torch.OutOfMemoryError itself.
 *
 * Each instance keeps one strategy per device, created on the first allocation for that device
 * (thread-safe). Instances are never destroyed: memory PyTorch still holds at exit is given back
 * by the driver, and frees that arrive during interpreter shutdown find a live allocator.
 *
 * Device -1 is host memory for a strategy with the hostDevice flag (expandable: its host twin, on
 * mmap), so that the library, sleep and wake included, can be exercised on a machine without a GPU;
 * PyTorch never asks for it. Other strategies refuse it at the first allocation.
 *
 * All functions are thread-safe. No C++ exception crosses this interface, with one documented
 * exception: gpumem_malloc under GPUMEM_OOM=raise.
 */
#ifndef GPUMEM_TORCH_H
#define GPUMEM_TORCH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h> /* ssize_t */

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define GPUMEM_TORCH_API __attribute__((visibility("default")))
#else
#define GPUMEM_TORCH_API
#endif

/* cudaStream_t without the CUDA headers: the same type (driver_types.h). */
struct CUstream_st;
typedef struct CUstream_st* gpumem_stream_t;

/* Return codes. */
#define GPUMEM_TORCH_OK 0
#define GPUMEM_TORCH_ERR_CONFIG 1        /* a bad environment value; nothing was created */
#define GPUMEM_TORCH_ERR_DEVICE 2        /* device index out of range, or no CUDA device */
#define GPUMEM_TORCH_ERR_CUDA 3          /* creating the strategy, or a CUDA call, failed */
#define GPUMEM_TORCH_ERR_ARGUMENT 4      /* a NULL output pointer, an unknown pointer, an unknown tag */
#define GPUMEM_TORCH_ERR_OUT_OF_MEMORY 5 /* sleep: host memory for the backups; wake: device memory */
#define GPUMEM_TORCH_ERR_STATE 6         /* a strategy that cannot sleep; another state the call cannot be made in */
#define GPUMEM_TORCH_ERR_DRIVER 7        /* the CUDA driver is older than the strategy needs (named in the error) */

/* Version of this interface (the struct below included). */
#define GPUMEM_TORCH_ABI_VERSION 2

/* Allocator instances per process, number 0 (the environment's) included. */
#define GPUMEM_TORCH_MAX_INSTANCES 8

/* gpumem_set_thread_placement's values. */
#define GPUMEM_TORCH_PLACE_DEFAULT (-1) /* the instance's GPUMEM_TIERED_PLACEMENT */
#define GPUMEM_TORCH_PLACE_AUTO 0       /* the device while the budget allows, then the host */
#define GPUMEM_TORCH_PLACE_DEVICE 1     /* the device only (out of memory rather than the host) */
#define GPUMEM_TORCH_PLACE_HOST 2       /* mapped pinned host memory only */

/* Statistics of one device's strategy. All byte counts are the sizes PyTorch asked for (a
 * tensor storage's nbytes), not rounded block sizes. */
typedef struct gpumem_torch_stats {
  uint64_t allocated_bytes;      /* bytes PyTorch holds now */
  uint64_t peak_allocated_bytes; /* high-water mark of allocated_bytes since start / reset */
  uint64_t reserved_bytes;       /* bytes the strategy holds from the driver (pool segments,
                                    the async pool's reserve; = allocated for cuda and uvm) */
  uint64_t peak_reserved_bytes;
  uint64_t alloc_count;          /* allocations served (size > 0), cumulative */
  uint64_t free_count;           /* frees served, cumulative */
  uint64_t upstream_alloc_count; /* driver allocations (cudaMalloc, cudaMallocManaged,
                                    cudaMallocFromPoolAsync) */
  uint64_t upstream_free_count;  /* driver frees */
  uint64_t oom_count;            /* gpumem_malloc calls that failed for lack of memory */
  int64_t largest_free_block;    /* pool: largest cached free block; -1 elsewhere */
  uint64_t segment_count;        /* pool: segments held; cuda/uvm: live allocations; async: 0 */
  uint64_t zero_size_count;      /* gpumem_malloc(0) calls (answered with NULL) */
  uint64_t error_count;          /* gpumem_malloc calls that failed for another reason */
  uint64_t bad_free_count;       /* gpumem_free calls the strategy rejected (unknown pointer) */
  uint64_t size_fixup_count;     /* gpumem_free calls whose size differed from the allocated
                                    one and were freed with the allocated size */
  int64_t host_allocated_bytes;      /* tiered: the part of allocated_bytes on the host tier; -1 elsewhere */
  int64_t peak_host_allocated_bytes; /* tiered: its high-water mark; -1 elsewhere */
  int64_t host_reserved_bytes;       /* tiered: pinned host bytes held (live and cached); -1 elsewhere */
  int32_t active;                /* 1 once the device's strategy exists, else 0 */
  int32_t device;
} gpumem_torch_stats;

/* Reads and validates the environment; once it was valid, later calls return at once and the
 * environment is never read again. A bad value keeps nothing (a later call reads again). Touches no
 * CUDA state. Returns GPUMEM_TORCH_OK or GPUMEM_TORCH_ERR_CONFIG (message: gpumem_last_error). */
GPUMEM_TORCH_API int gpumem_init(void);

/* The calling thread's last error message ("" if none). Valid until the thread's next call. */
GPUMEM_TORCH_API const char* gpumem_last_error(void);

/* The strategy and options in effect, e.g. "strategy=pool pool.max_reserved=none oom=raise".
 * Calls gpumem_init if needed; after a configuration error, "error: <message>". */
GPUMEM_TORCH_API const char* gpumem_config(void);

/* PyTorch's alloc_fn. size 0 returns NULL (PyTorch never frees it). On failure:
 *  - GPUMEM_OOM=raise (default): throws std::runtime_error. Out of memory: the message follows
 *    PyTorch's convention, "CUDA out of memory. gpumem: <strategy> could not allocate <size> on
 *    device <n> (<cause>); reserved <bytes>, allocated <bytes>, largest free block <bytes or n/a>"
 *    (gpumem_format_oom), then the out-of-memory report's capacity and verdict
 *    (gpumem_last_oom_report); other failures start "gpumem: ". PyTorch's CUDAPluggableAllocator
 *    does not check the pointer it gets back, so a NULL would become a tensor at address 0 and
 *    the first kernel touching it would fail with an illegal address; the exception instead
 *    reaches Python as a RuntimeError, as with RMM's allocator.
 *  - GPUMEM_OOM=null: returns NULL and never throws (for C callers that check the result).
 * Either way the message is kept for gpumem_last_error and the failure counted in the stats. */
GPUMEM_TORCH_API void* gpumem_malloc(ssize_t size, int device, gpumem_stream_t stream);

/* PyTorch's free_fn. NULL is ignored. `stream` is the stream the memory was allocated on (what
 * PyTorch passes); the strategy keeps the memory from other streams until work queued there has
 * run. A size that differs from the allocated one is corrected (counted in size_fixup_count);
 * an unknown pointer is counted in bad_free_count and left alone. Never throws. */
GPUMEM_TORCH_API void gpumem_free(void* ptr, ssize_t size, int device, gpumem_stream_t stream);

/* PyTorch's record_stream_fn (settable only from C++: CUDAPluggableAllocator::
 * set_record_stream_fn; the Python CUDAPluggableAllocator does not expose it): `ptr` is used on
 * `stream` too, so its memory is not reused before the work queued there has finished.
 * Returns 0, or GPUMEM_TORCH_ERR_ARGUMENT for a pointer no device's strategy holds. */
GPUMEM_TORCH_API int gpumem_record_stream(void* ptr, gpumem_stream_t stream);

/* Statistics of `device`. A device whose strategy does not exist yet reports zeros with
 * active = 0. Returns 0, GPUMEM_TORCH_ERR_ARGUMENT for out == NULL, GPUMEM_TORCH_ERR_DEVICE
 * for a negative or too large index. */
GPUMEM_TORCH_API int gpumem_stats(int device, gpumem_torch_stats* out);

/* sizeof(gpumem_torch_stats), for bindings that check their copy of the layout. */
GPUMEM_TORCH_API size_t gpumem_stats_size(void);

/* Sets the peaks (allocated, reserved) to the current values. Returns 0 or an error code. */
GPUMEM_TORCH_API int gpumem_reset_peak(int device);

/* Gives cached memory back to the driver (torch.cuda.empty_cache's job): pool releases its free
 * segments, async synchronises the device and trims its pool to 0; nothing to do for cuda and
 * uvm. Memory PyTorch holds is never touched. Returns 0 or an error code. */
GPUMEM_TORCH_API int gpumem_trim(int device);

/* GPUMEM_TORCH_ABI_VERSION. */
GPUMEM_TORCH_API int gpumem_abi_version(void);

/* The core's strategies as JSON text: [{"name", "description", "layer" ("leaf", "cache" or
 * "adaptor"), "wraps", "flags": {"requiresCuda", "capturable", "hostMemory", "requiresOptions",
 * "managedMemory", "spillsToHost", "peerAccess", "hostDevice", "kernelMemory", "sleep"}, "options": [{"key",
 * "kind", "minimum", "choices", "default", "help", "js", "env", "required"}]}]. GPUMEM_ALLOCATOR
 * takes the names whose kernelMemory flag is true; "env" is the variable that sets an option (null:
 * none). NULL on failure (gpumem_last_error). Valid until the thread's next call. Reads no
 * configuration and touches no CUDA. */
GPUMEM_TORCH_API const char* gpumem_strategies(void);

/* The CUDA driver as gpumem sees it, as JSON text: {"loaded": bool, "version": 12040 (0 without a
 * driver), "path": the library opened (libcuda.so.1, or $GPUMEM_CUDA_DRIVER), "failure": why it is
 * not usable ("" when loaded), "needs": {"<strategy>": [{"what", "version"}]}, "refused":
 * {"<strategy>": {"what", "version"} or null}} for every strategy. Opens the driver (cuInit) but
 * makes no context. NULL on failure (gpumem_last_error). Valid until the thread's next call. */
GPUMEM_TORCH_API const char* gpumem_driver_json(void);

/* What one replay pass measured (gpumem_replay). */
typedef struct gpumem_replay_result {
  uint64_t ooms;          /* allocations that ran out of memory (their frees skipped) */
  uint64_t allocs;        /* allocations that succeeded */
  uint64_t frees;         /* frees made */
  uint64_t skipped_frees; /* frees of an allocation that ran out of memory */
  uint64_t peak_allocated_bytes;
  uint64_t peak_reserved_bytes;
  uint64_t end_reserved_bytes; /* reserved at the end of the trace, before the cleanup frees */
} gpumem_replay_result;

/* gpumem_replay's flags. */
#define GPUMEM_REPLAY_ADDRESS_ONLY 1u      /* over address-only memory (the registry's addressOnly flag): takes none */
#define GPUMEM_REPLAY_STOP_AT_FIRST_OOM 2u /* end the pass at its first out-of-memory (ooms is then 0 or 1) */

/* Replays a compiled trace once through a fresh chain of `strategy` (a registered name) with
 * `option_count` options (JavaScript keys such as "upstream", values in their text form as the
 * variables take them: "host", "1GiB", "1") capped at `limit_bytes` (0: no cap), built by the core's
 * chain builder as the Node binding builds it, in the core's native replay loop (gpumem/replay.hpp):
 * per operation, `action` 0 allocates `bytes` into `slot`, 1 frees it; `stream` is a stream handle
 * (0 the default stream; on host memory, any other value a stream key). `flags`: GPUMEM_REPLAY_*
 * (ADDRESS_ONLY only for a strategy whose registry entry has the addressOnly flag). The program is
 * validated before anything is allocated. Returns GPUMEM_TORCH_OK and fills `out`, or
 * GPUMEM_TORCH_ERR_ARGUMENT (a bad name, option, flag or program) or GPUMEM_TORCH_ERR_STATE (the
 * chain could not be built or a call failed otherwise), the message in gpumem_last_error. Reads no
 * configuration. */
GPUMEM_TORCH_API int gpumem_replay(const char* strategy, const char* const* option_keys,
                                   const char* const* option_values, size_t option_count, uint64_t limit_bytes,
                                   const uint8_t* action, const uint32_t* slot, const uint64_t* bytes,
                                   const uint64_t* stream, size_t ops, size_t slots, unsigned flags,
                                   gpumem_replay_result* out);

/* Makes an allocator instance from `spec`: lines "NAME=value" with the environment variables'
 * names and values (GPUMEM_ALLOCATOR=tiered\nGPUMEM_TIERED_DEVICE_BUDGET=8GiB); the environment is
 * not read. `spec` ends at its first NUL: a binding whose strings may hold one (Python's may) must
 * refuse them before the call, or a value would be read cut short. Returns its number (1 ..), served by gpumem_malloc_<n> / gpumem_mempool_malloc_<n> /
 * gpumem_free_<n>; or -GPUMEM_TORCH_ERR_CONFIG for a bad spec, -GPUMEM_TORCH_ERR_ARGUMENT when
 * every instance is taken (message: gpumem_last_error). Instances are never destroyed. */
GPUMEM_TORCH_API int gpumem_instance_create(const char* spec);

/* The description of `spec` (as gpumem_config), or NULL for a bad one (gpumem_last_error);
 * validation only: nothing is created. Valid until the thread's next call. */
GPUMEM_TORCH_API const char* gpumem_describe_config(const char* spec);

/* The description of instance `n` (0: gpumem_config), or "error: <message>". */
GPUMEM_TORCH_API const char* gpumem_instance_config(int n);

/* Statistics, peak reset and trim of instance `n` (0: the same as the functions above). A number
 * no instance has: GPUMEM_TORCH_ERR_ARGUMENT. */
GPUMEM_TORCH_API int gpumem_instance_stats(int n, int device, gpumem_torch_stats* out);
GPUMEM_TORCH_API int gpumem_instance_reset_peak(int n, int device);
GPUMEM_TORCH_API int gpumem_instance_trim(int n, int device);

/* Where the calling thread's next allocations from a tiered instance go: one of
 * GPUMEM_TORCH_PLACE_*. Other strategies ignore it. Stores the previous value in *previous (when
 * not NULL). Returns 0, or GPUMEM_TORCH_ERR_ARGUMENT for another value. PyTorch has no allocation
 * tags; gpumem_torch.place('host') sets this around a block of code. */
GPUMEM_TORCH_API int gpumem_set_thread_placement(int placement, int* previous);
GPUMEM_TORCH_API int gpumem_thread_placement(void);

/* The out-of-memory message gpumem_malloc raises, for `stats` (NULL: nothing reserved yet):
 * written to `out` (at most out_size - 1 characters and a NUL); returns its full length. */
GPUMEM_TORCH_API size_t gpumem_format_oom(const char* strategy, uint64_t request_bytes, int device, const char* cause,
                                          const gpumem_torch_stats* stats, char* out, size_t out_size);

/* The report on the process's last out-of-memory failure (any instance, any device), as one JSON
 * object: its figures (requestBytes, liveBytes, reservedBytes, largestFreeBlock, capacityBytes and
 * capacitySource), the verdict ("real", "fragmentation" or "unknown", the words of `gpumem doctor`),
 * the replay of the window of recent events (replayed, skipReason, windowEvents, liveBlocks,
 * replayMs, and per strategy: fits, requestFits, ooms, peakReservedBytes) and the sentences added to
 * the message (text). NULL when no allocation has failed yet. Valid until the thread's next call.
 * The raised message already carries the report after its figures: ". Fragmentation: ... Replayed
 * the last N events ... (T ms): expandable would have fit ...; pool would not." GPUMEM_OOM_WINDOW
 * (events kept per device, default 65536, 0: off) and GPUMEM_OOM_REPLAY_MS (the replay's time
 * bound, default 250, 0: no replay) set it; docs/torch.md says what it cannot know. Not in
 * GPUMEM_TORCH_ABI_VERSION 2's first libraries: look it up before calling it. */
GPUMEM_TORCH_API const char* gpumem_last_oom_report(void);

/* Warnings: a deprecated spelling read from the configuration (GPUMEM_ALLOCATOR=native, ...:
 * GPUMEM_TORCH_WARN_DEPRECATED), or something that did not work and that the program goes on
 * without (GPUMEM_TRACE could not start, a configuration error met by the first allocation:
 * GPUMEM_TORCH_WARN_RUNTIME). Written to stderr, a line each, unless a handler is set. */
#define GPUMEM_TORCH_WARN_DEPRECATED 1
#define GPUMEM_TORCH_WARN_RUNTIME 2
typedef void (*gpumem_warning_handler)(int category, const char* message);

/* Sets the function that gets each warning instead of stderr (NULL: stderr again); returns the
 * previous one. It is called on the thread whose call raised the warning, with no lock of the
 * library held, and must not throw; `message` (one line, no newline) is valid during the call.
 * Warnings raised inside gpumem_mempool_malloc_<n> and gpumem_free[_<n>] (PyTorch may call them
 * under its allocator lock), on the trace's writer thread and at process exit go to stderr
 * whatever is set. The gpumem_torch package sets one that re-emits them with Python's warnings
 * module (FutureWarning, RuntimeWarning). Not in GPUMEM_TORCH_ABI_VERSION 2's first libraries:
 * look it up before calling it. */
GPUMEM_TORCH_API gpumem_warning_handler gpumem_set_warning_handler(gpumem_warning_handler handler);

/* Sleep and wake by tag (gpumem/sleep.hpp), for strategies with the sleep flag (expandable,
 * tiered: their memory is mapped through CUDA virtual memory management). Every allocation carries
 * the tag current when it is made: the process tag (gpumem_set_process_tag), else "default".
 * sleep releases the physical memory of the tags named, live and cached, and keeps their virtual
 * addresses, after copying the live bytes of the tags that keep their content to pinned host
 * memory; wake maps physical memory again at the same addresses and copies the content back, so
 * that pointers PyTorch holds and captured CUDA graphs stay valid. While a tag sleeps, freeing its
 * blocks is fine, an allocation in it fails (invalid state: "tag 'kv' is asleep: wake it before
 * allocating in it"), and nothing may read or write its blocks. Not in GPUMEM_TORCH_ABI_VERSION 2's
 * first libraries: look them up before calling them.
 *
 * Tag names: 1 to 128 bytes without NUL or control characters (UTF-8 as given). */

/* Sets the process tag, the tag of every later allocation (on any thread: autograd's backward
 * allocates on threads of its own); NULL (or "default") clears it. Returns the previous
 * tag's name (valid until the thread's next tag call), or NULL for a bad name (gpumem_last_error). */
GPUMEM_TORCH_API const char* gpumem_set_process_tag(const char* name);

/* The tag the calling thread's allocations get now ("default" where none is set). */
GPUMEM_TORCH_API const char* gpumem_current_tag(void);

/* A sleep request (the core's sleep_request, gpumem/sleep.hpp), passed whole to
 * gpumem_instance_sleep_request. `tags`: tag_count names, or NULL / 0 for every tag the strategy has
 * allocated in. keep_all != 0: every tag keeps its content; else only the keep_count tags named in
 * `keep` do (none when 0), the others discard it. keep_cache != 0: the tags' cached memory sleeps
 * too and wake maps it again (see gpumem_instance_sleep_cache). */
typedef struct gpumem_sleep_request {
  const char* const* tags;
  size_t tag_count;
  int keep_all;
  const char* const* keep;
  size_t keep_count;
  int keep_cache;
} gpumem_sleep_request;

/* Puts the tags of `request` (instance k's strategy, on `device`) to sleep: the one entry point that
 * takes a whole request; gpumem_instance_sleep and gpumem_instance_sleep_cache are it with the
 * request's fields as arguments. *report and the errors as for gpumem_instance_sleep;
 * GPUMEM_TORCH_ERR_ARGUMENT for a NULL request. */
GPUMEM_TORCH_API int gpumem_instance_sleep_request(int k, int device, const gpumem_sleep_request* request,
                                                   const char** report);

/* Puts tags of instance k's strategy on `device` to sleep. `tags`: tag_count names, or NULL / 0 for
 * every tag the strategy has allocated in. keep_all != 0: every tag keeps its content; else only
 * the keep_count tags named in `keep` do (none when 0), the others discard it (their blocks read
 * as undefined after wake). Tags asleep already are reported unchanged. It waits for the work
 * queued on the device first. On success *report (when not NULL) is the report as JSON, valid until
 * the thread's next sleep call: {"changed": [names], "unchanged": [names], "deviceBytes": released,
 * "copiedBytes": copied to host memory, "seconds": wall time}. Errors, nothing changed:
 * GPUMEM_TORCH_ERR_ARGUMENT (a tag the strategy does not know, the message listing those it
 * does; a bad name; an instance never created), GPUMEM_TORCH_ERR_OUT_OF_MEMORY (host memory for the
 * backups cannot be had: checked before anything is released), GPUMEM_TORCH_ERR_STATE (a strategy
 * without the sleep flag), GPUMEM_TORCH_ERR_DEVICE, GPUMEM_TORCH_ERR_CUDA. A device the strategy
 * has not allocated on knows no tag. */
GPUMEM_TORCH_API int gpumem_instance_sleep(int k, int device, const char* const* tags, size_t tag_count, int keep_all,
                                           const char* const* keep, size_t keep_count, const char** report);

/* gpumem_instance_sleep with keep_cache != 0: the tags' cached memory (mapped, no live block) sleeps
 * too and wake maps it again, so a tag holds after wake what it held before sleep (torch_memory_saver's
 * and vLLM's sleep, whose PyTorch cache sits above them; a CUDA graph's freed intermediates).
 * GPUMEM_TORCH_ERR_ARGUMENT for a strategy that cannot keep it ('tiered'). */
GPUMEM_TORCH_API int gpumem_instance_sleep_cache(int k, int device, const char* const* tags, size_t tag_count,
                                                 int keep_all, const char* const* keep, size_t keep_count,
                                                 int keep_cache, const char** report);

/* Wakes the tags named (NULL / 0: every sleeping tag): physical memory mapped again at the same
 * addresses, kept content copied back, complete when it returns. Awake tags named are reported
 * unchanged. *report as for sleep ("deviceBytes": mapped, "copiedBytes": copied back). Errors as
 * for sleep; GPUMEM_TORCH_ERR_OUT_OF_MEMORY when the device has no room: the tags stay asleep with
 * their backups whole. */
GPUMEM_TORCH_API int gpumem_instance_wake(int k, int device, const char* const* tags, size_t tag_count,
                                          const char** report);

/* gpumem_instance_wake with retain_backup != 0: each woken tag keeps the host memory that held its
 * content, readable (read_backup, backup_view) until it sleeps again, which reuses it at the same
 * host addresses for the same blocks (torch_memory_saver's retain_cpu_backup).
 * GPUMEM_TORCH_ERR_ARGUMENT for a strategy that cannot retain ('tiered'). */
GPUMEM_TORCH_API int gpumem_instance_wake_retain(int k, int device, const char* const* tags, size_t tag_count,
                                                 int retain_backup, const char** report);

/* The strategy's tags on `device`, in the order first allocated in, as JSON valid until the
 * thread's next sleep call: {"tags": [{"tag", "asleep", "mode" ("keep" or "discard"),
 * "allocatedBytes", "deviceBytes", "sleptBytes", "backupBytes"}], "backupPoolBytes": host bytes
 * kept for later backups}. Errors as for sleep. */
GPUMEM_TORCH_API int gpumem_instance_tag_stats(int k, int device, const char** json);

/* Frees the host memory kept for later backups (none that holds a sleeping tag's content). */
GPUMEM_TORCH_API int gpumem_instance_trim_backup(int k, int device);

/* Copies the kept content of [addr, addr + bytes) into `out` (host memory, `bytes` long) while its
 * tag sleeps in keep mode (or is awake with a retained backup), and sets *found to 1; *found 0,
 * nothing copied, where no backup holds all of that range (awake, discarded, or not inside a live
 * block). Errors as for
 * tag_stats. torch_memory_saver's get_cpu_backup. */
GPUMEM_TORCH_API int gpumem_instance_read_backup(int k, int device, const void* addr, size_t bytes, void* out,
                                                 int* found);

/* Sets *host to where the backup holds [addr, addr + bytes) when that is one stretch of host memory
 * (a sleeping tag's in keep mode, or an awake tag's retained one), else NULL. The memory stays valid
 * until that tag wakes without retain_backup, sleeps again, or the block is freed.
 * torch_memory_saver's get_cpu_backup(zero_copy=True). Errors as for tag_stats. */
GPUMEM_TORCH_API int gpumem_instance_backup_view(int k, int device, const void* addr, size_t bytes,
                                                 const void** host);

/* Starts pinning host memory on background threads so that the backup pool on `device` holds at
 * least `bytes` (what is pooled or being pinned counts), and returns without waiting: a first sleep
 * then copies at the host link's speed. Makes the device's strategy when nothing was allocated there
 * yet. GPUMEM_TORCH_ERR_OUT_OF_MEMORY past backupLimitBytes (or MemAvailable less 10% of MemTotal),
 * starting nothing; GPUMEM_TORCH_ERR_STATE for a strategy that cannot sleep. GPUMEM_SLEEP_RESERVE
 * does the same when the strategy is made. */
GPUMEM_TORCH_API int gpumem_instance_reserve_backup(int k, int device, uint64_t bytes);

/* The same for instance 0 (the environment's: gpumem_malloc). */
GPUMEM_TORCH_API int gpumem_sleep(int device, const char* const* tags, size_t tag_count, int keep_all,
                                  const char* const* keep, size_t keep_count, const char** report);
GPUMEM_TORCH_API int gpumem_wake(int device, const char* const* tags, size_t tag_count, const char** report);
GPUMEM_TORCH_API int gpumem_tag_stats(int device, const char** json);
GPUMEM_TORCH_API int gpumem_trim_backup(int device);

/* The entry points of instance n, for n = 0 .. GPUMEM_TORCH_MAX_INSTANCES - 1. */
#define GPUMEM_TORCH_DECLARE_INSTANCE(n)                                                              \
  GPUMEM_TORCH_API void* gpumem_malloc_##n(ssize_t size, int device, gpumem_stream_t stream);         \
  GPUMEM_TORCH_API void* gpumem_mempool_malloc_##n(ssize_t size, int device, gpumem_stream_t stream); \
  GPUMEM_TORCH_API void gpumem_free_##n(void* ptr, ssize_t size, int device, gpumem_stream_t stream);
GPUMEM_TORCH_DECLARE_INSTANCE(0)
GPUMEM_TORCH_DECLARE_INSTANCE(1)
GPUMEM_TORCH_DECLARE_INSTANCE(2)
GPUMEM_TORCH_DECLARE_INSTANCE(3)
GPUMEM_TORCH_DECLARE_INSTANCE(4)
GPUMEM_TORCH_DECLARE_INSTANCE(5)
GPUMEM_TORCH_DECLARE_INSTANCE(6)
GPUMEM_TORCH_DECLARE_INSTANCE(7)
#undef GPUMEM_TORCH_DECLARE_INSTANCE

#ifdef __cplusplus
}
#endif

#endif /* GPUMEM_TORCH_H */
