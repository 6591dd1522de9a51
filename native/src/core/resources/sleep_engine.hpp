// What the sleeping strategies share (gpumem/sleep.hpp): the copies out and back, the host memory
// that holds kept content, and the per-tag book (which tags a resource knows, which sleep and how).
// Internal to gpumem_core.
//
// The copies: on a device, cudaMemcpyAsync on a stream of the engine's own, device to pinned host
// memory, in pieces of at most copy_piece_bytes; a unit (a physical mapping) is released as soon
// as the copies that read it are done, while later pieces still copy, and at wake each unit's
// copies are queued as soon as it is mapped, while the next units map. On the host twin, memcpy.
// The host memory: pinned on a device (mapped, faulted in, registered with CUDA), plain on the twin,
// in chunks of pin_chunk_bytes made by pinning threads of the engine's own, so that a first sleep
// copies the chunks already pinned while the next ones are pinned (and reserve_ahead pins before any
// sleep). A wake (or a discarded backup) gives the chunks back to a pool for the next sleep, so that
// steady sleep/wake cycles pin nothing; trim() frees the pool.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpumem/sleep.hpp"
#include "gpumem/stats.hpp"
#include "gpumem/stream.hpp"

namespace gpumem::detail {

// A physical mapping a resource gives up at sleep and makes again at wake, at the same address.
struct sleep_unit {
  void* addr = nullptr;
  std::size_t bytes = 0;
};

// Bytes whose content a keep-sleep saves (a live block's); inside the units.
struct sleep_span {
  void* addr = nullptr;
  std::size_t bytes = 0;
};

class sleep_engine;

// The host memory holding one tag's kept content. Move-only; an empty backup holds nothing.
class sleep_backup {
 public:
  sleep_backup() = default;
  sleep_backup(sleep_backup&&) noexcept = default;
  sleep_backup& operator=(sleep_backup&&) noexcept = default;
  sleep_backup(const sleep_backup&) = delete;
  sleep_backup& operator=(const sleep_backup&) = delete;

  std::uint64_t bytes() const noexcept { return held_; }  // host bytes held (chunks)
  // Bytes reserve() granted that save_and_release takes from the pinning threads as it copies (0 once
  // it has); a multiple of pin_chunk_bytes.
  std::uint64_t pending_bytes() const noexcept { return pending_; }
  std::uint64_t saved_bytes() const noexcept;              // bytes of content still to restore
  bool empty() const noexcept { return chunks_.empty(); }
  // A block of [addr, addr + bytes) was freed while asleep: its content is not restored.
  void forget(const void* addr, std::size_t bytes) noexcept;
  // Copies the saved content of [addr, addr + bytes) into `out`; false, copying nothing, unless the
  // saved pieces cover all of it.
  bool read(const void* addr, std::size_t bytes, void* out) const noexcept;
  // Where the saved content of [addr, addr + bytes) lies when it is one stretch of host memory;
  // nullptr otherwise (not all of it saved, or split over chunks).
  const void* view(const void* addr, std::size_t bytes) const noexcept;

 private:
  friend class sleep_engine;
  struct piece {
    std::uintptr_t addr;  // where the content lives on the device
    std::size_t bytes;
    std::byte* host;      // where it is kept
  };
  // How a chunk's memory was had, so that it is given back the same way.
  enum class origin : std::uint8_t {
    mapped,      // part of a batch's mapping (the twin's, and a device's that could not be registered: none)
    registered,  // part of a batch's mapping, registered with CUDA
    host_alloc,  // cudaHostAlloc, where mapping or registering failed
  };
  struct chunk {
    std::byte* base;  // nullptr: the host refused it
    std::size_t bytes;
    origin from = origin::mapped;
  };
  std::vector<chunk> chunks_;
  std::vector<piece> pieces_;  // sorted by addr
  std::uint64_t held_ = 0;
  std::uint64_t pending_ = 0;
};

class sleep_engine {
 public:
  static constexpr std::size_t copy_piece_bytes = std::size_t{64} << 20;
  // Every chunk of host memory: small enough that the copies start after one is pinned and that
  // several threads pin at once, large enough that registering is not per-call bound.
  static constexpr std::size_t pin_chunk_bytes = std::size_t{128} << 20;
  // Threads pinning at once at most (each faults in and registers whole chunks).
  static constexpr unsigned max_pin_threads = 8;

  // kind: memory_kind::device (or pinned/managed: copies through CUDA on `device`), or host (the
  // twins: memcpy). Creates nothing until the first copy.
  sleep_engine(memory_kind kind, int device);
  ~sleep_engine();  // frees the pool (backups still held by callers must be given back first)
  sleep_engine(const sleep_engine&) = delete;
  sleep_engine& operator=(const sleep_engine&) = delete;

  // The most host bytes backups and the pool may hold together; nullopt: MemAvailable less 10% of
  // MemTotal at each reserve() (the 'pinned' strategy's cap), plus what is held already.
  void set_backup_limit(std::optional<std::uint64_t> bytes) noexcept { limit_ = bytes; }
  std::optional<std::uint64_t> backup_limit() const noexcept { return limit_; }

  // Host memory for `bytes` of content: the pool's chunks first (chunks the pinning threads have
  // finished join it here); the rest comes from chunks being pinned for no backup yet (reserve_ahead),
  // and what those lack is checked against the limit and handed to the pinning threads now, so that
  // they pin while save_and_release copies into the chunks already done (pinning is the slow part of
  // a first sleep). Throws out_of_memory (its message names host memory, the need and the limit) when
  // the rest is past the limit; `stats` goes into the error. Nothing else is done before.
  sleep_backup reserve(std::uint64_t bytes, const resource_stats& stats);

  // Starts pinning chunks so that the pool, with what is being pinned for no backup, holds at least
  // `bytes`, and returns at once. Throws out_of_memory past the limit, starting nothing.
  void reserve_ahead(std::uint64_t bytes, const resource_stats& stats);

  // Waits for all work queued on the memory: the device's (cudaDeviceSynchronize), or on the host
  // twin every host stream's (defer_host_work). What sleep does first, so that every copy and
  // release comes after the work that used the memory.
  void quiesce();

  // Where the time of the sleep in progress went: reset by begin_timing(), added to by quiesce and
  // save_and_release, read by the resource into its report.
  void begin_timing() noexcept;
  sleep_timing end_timing() noexcept;

  // Copies `spans` (sorted by address, within the units, their total at most what reserve()
  // granted) into `backup`, and calls release(unit) for every unit (sorted by address) once no copy
  // reads it. Every copy is queued (and the backup's pending memory allocated) before the first
  // release, so a copy that cannot be queued, or host memory the host refuses (out_of_memory), throws
  // with nothing released; `stats` goes into that error. A copy that fails while running (a CUDA
  // error, which leaves the context unusable anyway) is rethrown after every unit has been released.
  void save_and_release(sleep_backup& backup, const std::vector<sleep_span>& spans, const std::vector<sleep_unit>& units,
                        const std::function<void(const sleep_unit&)>& release, const resource_stats& stats = {});

  // Calls map(unit) for every unit (sorted by address), copies the backup's content back into them
  // (each piece as soon as the units under it are mapped), and waits for the copies. When a map
  // throws, the units this call mapped are released again (release) and the error rethrown: the
  // backup is unchanged. On success the backup's memory goes back to the pool, or with `retain` stays
  // in the backup, its content readable, for the tag's next sleep (save_and_release lays the same
  // spans out over the same chunks at the same host addresses).
  void map_and_restore(sleep_backup& backup, const std::vector<sleep_unit>& units,
                       const std::function<void(const sleep_unit&)>& map,
                       const std::function<void(const sleep_unit&)>& release, bool retain = false);

  // Gives a backup's memory back to the pool (a discarded or restored backup). Never throws.
  void recycle(sleep_backup& backup) noexcept;

  std::uint64_t pool_bytes() const noexcept;  // host bytes in the pool, pinned chunks not taken yet included
  std::uint64_t pinning_bytes() const noexcept;  // host bytes handed to the pinning threads, not done yet
  void trim() noexcept;                       // frees the pool (chunks still being pinned join it later)

 private:
  void check_limit(std::uint64_t more, std::uint64_t bytes, const resource_stats& stats);

  struct impl;
  std::unique_ptr<impl> impl_;
  std::optional<std::uint64_t> limit_;
};

// The tags a sleeping resource knows and their sleep state. Not thread-safe: the resource's lock
// guards it.
class tag_book {
 public:
  struct entry {
    tag_id tag = default_tag;
    bool asleep = false;
    sleep_mode mode = sleep_mode::keep;
    std::uint64_t slept_bytes = 0;  // device bytes the sleep released
    sleep_backup backup;            // keep: the content
  };

  // Remembers `tag` (an allocation in it); throws invalid_state naming it when it is asleep.
  void on_allocate(tag_id tag);
  bool asleep(tag_id tag) const noexcept;
  entry* find(tag_id tag) noexcept;
  const std::vector<entry>& entries() const noexcept { return entries_; }

  // The tags a sleep request puts to sleep, with their modes, in the book's order; tags asleep
  // already go to report.unchanged. Throws invalid_argument (range, "tags") for a tag the book does
  // not know, listing the ones it does; `strategy` opens the message.
  std::vector<std::pair<tag_id, sleep_mode>> plan_sleep(const sleep_request& request, sleep_report& report,
                                                        const char* strategy) const;
  // The sleeping tags among `tags` (empty: all); awake ones go to report.unchanged. Throws as above.
  std::vector<tag_id> plan_wake(const std::vector<tag_id>& tags, sleep_report& report, const char* strategy) const;

  // sleepable's read_backup and backup_view: the content of a tag asleep in keep mode, or of an awake
  // one whose wake retained its backup (a discarding tag keeps nothing).
  bool read_backup(const void* addr, std::size_t bytes, void* out) const noexcept;
  const void* backup_view(const void* addr, std::size_t bytes) const noexcept;

 private:
  void check_known(const std::vector<tag_id>& tags, const char* strategy) const;
  std::vector<entry> entries_;
};

}  // namespace gpumem::detail
