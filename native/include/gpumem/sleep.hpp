// Sleep and wake by tag: a strategy whose memory is mapped through virtual memory management
// ('expandable', 'tiered': registry flag `sleep`) can give the physical memory of some allocations
// back to the driver while keeping their virtual addresses, and map new physical memory there later,
// so that held pointers and captured CUDA graphs stay valid (vLLM's CuMemAllocator
// sleep(offload_tags) / wake_up(tags), torch_memory_saver's pause / resume).
//
//  - every allocation carries a tag: the calling thread's tag (tag_scope) where one is set, else the
//    process tag (set_process_tag), else "default". Tags are names, interned once per process;
//  - sleep(request) puts tags to sleep. It waits for the work queued on the device, copies the live
//    bytes of the tags that keep their content to host memory (pinned on a device, so that the copies
//    run at the host link's speed), and releases the tags' physical memory, live and cached, keeping
//    the virtual ranges. A tag that discards keeps nothing: its blocks read as undefined after wake;
//  - wake(tags) maps physical memory again at the same addresses and copies kept content back; the
//    copies are complete when it returns;
//  - while a tag sleeps, its blocks may be freed (the saved copy is dropped), an allocation in it
//    throws invalid_state naming the tag, and nothing may read or write its blocks;
//  - the host memory that held a backup is kept after wake for the next sleep (no pinning per call);
//    trim_backup() gives it back.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpumem {

// ---------------------------------------------------------------------------------------------
// Tags

using tag_id = std::uint32_t;
// The tag of allocations made where no tag is set; its name is "default".
constexpr tag_id default_tag = 0;
constexpr std::size_t max_tag_length = 128;

// The id of the tag `name` (the same id for the same name, for the life of the process). Throws
// invalid_argument (range, argument "tag") for an empty name, one longer than max_tag_length bytes,
// or one holding a NUL or a control character.
tag_id intern_tag(std::string_view name);
// The name of an interned id ("default" for default_tag). Throws invalid_argument for an id
// intern_tag never returned.
std::string tag_name(tag_id id);

namespace detail {
// Read by current_tag() on every allocation of a sleeping strategy, so inline here (tags.cpp sets
// them). Each binary that links the core (the addon, libgpumem_torch) has its own.
inline std::atomic<tag_id> process_tag{default_tag};
inline thread_local bool thread_tag_set = false;
inline thread_local tag_id thread_tag = default_tag;
}  // namespace detail

// The tag new allocations on this thread get: this thread's scope where one is open, else the
// process tag, else default_tag.
inline tag_id current_tag() noexcept {
  return detail::thread_tag_set ? detail::thread_tag : detail::process_tag.load(std::memory_order_relaxed);
}
// The process tag (every thread without a scope of its own); returns the previous one. default_tag
// clears it.
tag_id set_process_tag(tag_id tag) noexcept;
// This thread's tag, or nullopt to fall back to the process tag; returns the previous setting.
std::optional<tag_id> set_thread_tag(std::optional<tag_id> tag) noexcept;

// Sets this thread's tag for a scope and restores the previous setting when it ends.
class tag_scope {
 public:
  explicit tag_scope(tag_id tag) noexcept : previous_(set_thread_tag(tag)) {}
  ~tag_scope() { set_thread_tag(previous_); }
  tag_scope(const tag_scope&) = delete;
  tag_scope& operator=(const tag_scope&) = delete;

 private:
  std::optional<tag_id> previous_;
};

// ---------------------------------------------------------------------------------------------
// Sleep and wake

// What a sleeping tag does with its content: copy it to host memory (keep) or drop it (discard).
enum class sleep_mode : std::uint8_t { keep, discard };
const char* sleep_mode_name(sleep_mode mode) noexcept;  // "keep", "discard"

struct sleep_request {
  // The tags to put to sleep; empty: every tag the resource knows (has ever allocated in).
  std::vector<tag_id> tags;
  // Which of them keep their content: all of them (keep_all), or those listed in `keep` (the others
  // discard: vLLM's offload_tags).
  bool keep_all = true;
  std::vector<tag_id> keep;
  // Also the tags' cached memory (mapped, no live block in it) sleeps, and wake maps it again, so that
  // a tag holds after wake the device memory it held before sleep: what a framework whose own cache
  // sits above the allocator expects (torch_memory_saver and vLLM's CuMemAllocator pause PyTorch's
  // cached segments with the live ones), and what a CUDA graph needs whose intermediates were freed
  // at the end of capture. False (the default): cached memory is released for good, as a release
  // would. A strategy that cannot keep it throws invalid_argument (range, "keep_cache").
  bool keep_cache = false;
};

struct wake_request {
  // The tags to wake; empty: every sleeping tag.
  std::vector<tag_id> tags;
  // The host memory holding a woken tag's content stays that tag's, its content readable
  // (read_backup, backup_view) until the tag sleeps again, which reuses it at the same host
  // addresses where the same blocks are kept (torch_memory_saver's retain_cpu_backup). False: it goes
  // back to the pool for any tag's next sleep. A strategy that cannot retain throws invalid_argument
  // (range, "retain_backup").
  bool retain_backup = false;
};

// Where one sleep's time went, for benchmarks (bench/sleep/sleep_bench.py prints it). The *_seconds
// of the calling thread add up to about the report's seconds; fault and register run on the pinning
// threads, in parallel with the copies, and are summed over those threads.
struct sleep_timing {
  double quiesce_seconds = 0;      // waiting for the work queued on the memory
  double backup_wait_seconds = 0;  // the copies waiting for pinned host memory not yet ready
  double queue_seconds = 0;        // queueing the copies
  double copy_wait_seconds = 0;    // waiting for copies to finish before releasing their memory
  double release_seconds = 0;      // unmapping (giving physical memory back)
  double fault_seconds = 0;        // pinning threads, summed: faulting host pages in
  double register_seconds = 0;     // pinning threads, summed: registering them with CUDA
  std::uint64_t pooled_bytes = 0;  // host bytes taken from the pool (steady cycles, a reservation)
  std::uint64_t pinned_bytes = 0;  // host bytes pinned while this sleep waited or copied
};

// What one sleep() or wake() did.
struct sleep_report {
  std::vector<tag_id> changed;    // the tags put to sleep (woken)
  std::vector<tag_id> unchanged;  // tags named that were asleep already (awake already): nothing done
  std::uint64_t device_bytes = 0; // physical device bytes released (sleep) or mapped (wake)
  std::uint64_t copied_bytes = 0; // bytes copied to host memory (sleep) or back (wake)
  double seconds = 0;             // wall time of the call
  sleep_timing timing;            // sleep only: where the time went
};

// One tag of a resource.
struct tag_state {
  tag_id tag = default_tag;
  bool asleep = false;
  sleep_mode mode = sleep_mode::keep;  // how it sleeps (meaningful while asleep)
  std::uint64_t allocated_bytes = 0;   // bytes callers asked for and hold, asleep or awake
  std::uint64_t device_bytes = 0;      // physical device memory the tag holds now (live and cached)
  std::uint64_t slept_bytes = 0;       // while asleep: the device bytes its sleep released
  std::uint64_t backup_bytes = 0;      // host bytes holding its kept content
};

// Implemented by the leaves of strategies with the `sleep` flag; a built chain points at it
// (resource_chain::sleeper). Thread-safe, as the resources are.
class sleepable {
 public:
  sleepable() = default;
  virtual ~sleepable() = default;
  sleepable(const sleepable&) = delete;
  sleepable& operator=(const sleepable&) = delete;

  // Puts the tags to sleep (see the file comment). Throws, changing nothing:
  //  - invalid_argument (range, "tags") for a tag the resource does not know, listing the ones it
  //    does;
  //  - out_of_memory when host memory for the backups cannot be had (backup_limit_bytes, or the
  //    host refuses): before anything is copied or released.
  sleep_report sleep(const sleep_request& request) { return do_sleep(request); }
  // Wakes the tags named (empty: every sleeping tag). Throws invalid_argument as sleep() does, and
  // out_of_memory when the device has no room: then the tags stay asleep, their backups whole.
  sleep_report wake(const std::vector<tag_id>& tags, bool retain_backup = false) {
    return do_wake(wake_request{tags, retain_backup});
  }
  // Every tag the resource knows, in the order first allocated in.
  std::vector<tag_state> tag_states() const { return do_tag_states(); }
  // Host bytes kept for later backups (not holding any sleeping tag's content), and their release.
  std::uint64_t backup_pool_bytes() const { return do_backup_pool_bytes(); }
  void trim_backup() { do_trim_backup(); }
  // Copies the kept content of [addr, addr + bytes) into `out` (host memory) while its tag sleeps in
  // keep mode; false, copying nothing, where no sleeping tag's backup holds all of that range (its
  // tag is awake, discards, or the range is not inside a live block). torch_memory_saver's
  // get_cpu_backup.
  // A tag woken with retain_backup reads its retained content (as it was at the sleep) until it sleeps
  // again.
  bool read_backup(const void* addr, std::size_t bytes, void* out) const { return do_read_backup(addr, bytes, out); }
  // Where read_backup would read [addr, addr + bytes) from, when that content lies in one stretch of
  // host memory; nullptr otherwise (nothing holds it, or it spans separate chunks). Valid until the
  // tag wakes without retain_backup, sleeps again, or the block is freed: torch_memory_saver's
  // get_cpu_backup(zero_copy=True).
  const void* backup_view(const void* addr, std::size_t bytes) const { return do_backup_view(addr, bytes); }
  // Starts pinning host memory so that the pool holds at least `bytes` (what is there or being pinned
  // counts), on threads of its own, and returns at once: a first sleep then copies at the host link's
  // speed. A sleep before it is done takes what is ready and waits for, or adds to, the rest. Throws
  // out_of_memory (before anything starts) past the backup limit; a chunk the host refuses later
  // surfaces as the sleep's out_of_memory. backup_pool_bytes() counts the chunks as they are ready.
  void reserve_backup(std::uint64_t bytes) { do_reserve_backup(bytes); }
  // Throws invalid_state naming the tag when [ptr, ptr + bytes) overlaps memory of a sleeping tag
  // (reading or writing it would fault): checked by read/write before they copy.
  void check_awake(const void* ptr, std::size_t bytes) const { do_check_awake(ptr, bytes); }

 private:
  virtual sleep_report do_sleep(const sleep_request& request) = 0;
  virtual sleep_report do_wake(const wake_request& request) = 0;
  virtual std::vector<tag_state> do_tag_states() const = 0;
  virtual std::uint64_t do_backup_pool_bytes() const = 0;
  virtual void do_trim_backup() = 0;
  virtual bool do_read_backup(const void* addr, std::size_t bytes, void* out) const = 0;
  virtual const void* do_backup_view(const void* addr, std::size_t bytes) const = 0;
  virtual void do_reserve_backup(std::uint64_t bytes) = 0;
  virtual void do_check_awake(const void* ptr, std::size_t bytes) const = 0;
};

}  // namespace gpumem
