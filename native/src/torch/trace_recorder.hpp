// The allocation trace recorder of libgpumem_torch.so: every allocation, free and out-of-memory
// failure, written to a file in gpumem's JSONL trace format (what `gpumem replay` reads; see
// docs/traces.md) or in RMM's logging CSV (`Thread,Time,Action,Pointer,Size,Stream`).
//
// Bounded memory, no system call per event: events go into one of two fixed-size buffers of
// binary records under a mutex (uncontended: no system call; the clock is read through the vDSO).
// When the buffer being filled is full it is handed to a writer thread, which formats it and
// writes it to the file while callers fill the other one; a caller waits only when both are full
// (the file cannot keep up), so nothing is dropped and memory stays at two buffers plus the
// writer's 1 MiB of text. A background writer rather than the calling thread, so that formatting
// and write() never stall PyTorch's allocating threads.
//
// The file (output_file.hpp) is a temporary one beside the target until stop() renames it over the
// target: a recording that fails to write leaves the target as it was (a full disk never leaves a
// truncated trace), a hard link's other names keep their bytes, a device or FIFO is refused.
//
// JSONL: the header line is written when recording starts, with blank space before its closing
// brace; stop() fills that space with `,"eventCount":N`, so a reader can tell a complete trace
// from one cut short. A process that died before stop() leaves its trace in the temporary file
// (`.NAME.PID-N.tmp` beside NAME): a valid header without the count, and every whole line written.
//
// Python frames (frame_tags.hpp): with `named_frames` set, allocations carry the tag of their
// user frame, and stop() writes the tag names into blank space the header keeps for them (and
// the count); a trace cut short keeps `"tags":["other"]`, so its tags read as "other".
//
// No CUDA here: the recorder is host code, tested on its own (native/tests/trace_recorder_test).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "frame_tags.hpp"
#include "output_file.hpp"

namespace gpumem::torch {

enum class trace_action : std::uint8_t { alloc, free, oom };
enum class trace_format { jsonl, rmm_csv };

// RMM's CSV when the path ends in ".csv" (any case), gpumem's JSONL otherwise.
trace_format trace_format_for_path(const std::string& path);

// `s` as a JSON string, quotes included.
std::string json_quote(const std::string& s);

// The name of a format, for messages: "jsonl" or "rmm-csv" (the names `gpumem record` uses).
const char* trace_format_name(trace_format f);

struct trace_options {
  std::string path;
  trace_format format = trace_format::jsonl;
  std::string source = "libgpumem_torch";  // header "source"
  std::string allocator;                   // header "allocator" (omitted when empty)
  std::string device = "cuda";             // header "device"; each event also names its device
  std::string workload_json;               // header "workload": a JSON object, or empty
  std::size_t buffer_events = 1u << 16;    // events per buffer (two buffers)
  // JSONL: take allocation frame tags and name the `named_frames` that allocated the most bytes in
  // the header (at most frame_tags::max_named); 0: no frames, every event tag 0.
  std::uint32_t named_frames = 0;
};

class trace_recorder {
 public:
  // One event as buffered: 40 bytes.
  struct event {
    std::uint64_t time_ns;  // CLOCK_MONOTONIC
    std::uint64_t ptr;
    std::uint64_t bytes;
    std::uint64_t stream;
    std::uint32_t thread;  // the OS thread id (what RMM's logger writes)
    std::uint16_t tag;     // the frame tag (frame_tags), 0 without frames
    std::int8_t device;    // c10::DeviceIndex is 8 bits too
    trace_action action;
  };

  trace_recorder() = default;
  trace_recorder(const trace_recorder&) = delete;
  trace_recorder& operator=(const trace_recorder&) = delete;
  ~trace_recorder();  // stops (and flushes) a recording still running

  // Creates the temporary file, writes the header and starts the writer. Returns false with a
  // message when already recording, or when the file cannot be created or written (a device, FIFO,
  // socket or folder as the target included).
  bool start(const trace_options& options, std::string& error);

  // Records one event; a no-op when not recording. Thread-safe, never throws, no system call
  // except when a full buffer is handed to the writer (a wake-up) or both buffers are full (a wait).
  // `tag`: the allocation's frame tag, from intern_frame() of recording `generation`; a tag of
  // another recording (one started or stopped meanwhile) is recorded as 0.
  void record(trace_action action, std::uint64_t ptr, std::uint64_t bytes, std::uint64_t stream, int device,
              std::uint32_t tag = 0, std::uint64_t generation = 0) noexcept;

  // Whether the current recording takes frame tags, and which recording it is (a number that
  // start() increments).
  bool frames_active() const noexcept { return frames_.load(std::memory_order_relaxed); }
  std::uint64_t generation() const noexcept { return generation_.load(std::memory_order_acquire); }

  // The frame tag of `name` in recording `generation`: 0 when that recording is not the current
  // one, takes no frames, or has as many names as it may hold. Thread-safe.
  std::uint32_t intern_frame(std::uint64_t generation, const char* name);

  // Writes what is buffered, completes the header and renames the file over the target. `events`:
  // the events the file holds. Returns false with a message when nothing was being recorded or
  // writing failed (the target then holds what it held before the recording).
  bool stop(std::uint64_t& events, std::string& error);

  bool active() const noexcept { return active_.load(std::memory_order_relaxed); }
  // Whether writing the file failed (already reported on stderr when it happened).
  bool write_failed() const noexcept { return failed_.load(); }
  std::string path() const;
  std::uint64_t event_count() const;  // events recorded by the current (or last) recording

  // In a child made by fork(): the writer thread does not exist there and the file belongs to the
  // parent, so the child records nothing and never touches either (called by an atfork handler).
  void abandon_after_fork() noexcept;

 private:
  void writer_loop();
  bool write_events(const event* events, std::size_t count, std::string& error);
  bool write_all(const char* data, std::size_t size, std::string& error);
  void fail(const std::string& message);

  void hand_off_locked() noexcept;

  std::atomic<bool> active_{false};
  std::atomic<bool> frames_{false};
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<bool> forked_{false};
  std::mutex control_mutex_;  // serialises start() and stop()
  mutable std::mutex mutex_;
  std::condition_variable writer_wake_;  // a buffer to write, or stop
  std::condition_variable buffer_free_;  // the writer gave a buffer back

  // State under mutex_.
  bool recording_ = false;
  bool stopping_ = false;
  std::unique_ptr<event[]> storage_[2];
  std::size_t capacity_ = 0;
  event* filling_ = nullptr;  // callers write here
  std::size_t filled_ = 0;
  event* spare_ = nullptr;    // free for callers; null while the writer holds it
  event* pending_ = nullptr;  // handed to the writer
  std::size_t pending_count_ = 0;
  std::uint64_t recorded_ = 0;
  std::string path_;
  std::string error_;  // the writer's failure, reported by stop()

  // Owned by the writer thread while it runs (and by start/stop around it).
  std::thread writer_;
  output_file out_;  // the temporary file until stop() renames it
  int fd_ = -1;      // out_'s descriptor
  trace_format format_ = trace_format::jsonl;
  std::string text_;                 // formatted lines waiting for write()
  long long count_offset_ = -1;      // JSONL: where the header's blank space starts ...
  std::size_t count_space_ = 0;      // ... and its size
  frame_tags tags_;                  // with frames: the names the header gets at stop()
  std::uint64_t start_mono_ns_ = 0;  // CSV: monotonic time at start ...
  std::uint64_t start_day_ns_ = 0;   // ... and the local time of day then
  std::uint64_t written_ = 0;        // events formatted into the file
  std::uint64_t base_ns_ = 0;        // JSONL: the first event's time (timeNs counts from it)
  std::atomic<bool> failed_{false};
};

}  // namespace gpumem::torch
