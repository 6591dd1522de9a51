// The allocation trace recorder (trace_recorder.hpp): two event buffers, a writer thread, and the
// two file formats of docs/traces.md.
#include "trace_recorder.hpp"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <new>
#include <system_error>

namespace gpumem::torch {

static_assert(sizeof(trace_recorder::event) == 40, "an event is 40 bytes (gpumem_torch_trace.h says so)");

namespace {

// The JSONL header keeps this much blank space before its closing brace for `,"eventCount":N`
// (14 characters and at most 20 digits).
constexpr std::size_t count_space = 40;
// The writer hands formatted text to write() in pieces of about this size.
constexpr std::size_t text_chunk = 1u << 20;
constexpr std::uint64_t ns_per_s = 1000000000ull;
constexpr std::uint64_t ns_per_day = 86400ull * ns_per_s;

std::uint64_t monotonic_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);  // the vDSO: no system call
  return static_cast<std::uint64_t>(ts.tv_sec) * ns_per_s + static_cast<std::uint64_t>(ts.tv_nsec);
}

std::uint32_t thread_id() noexcept {
  // One system call per thread, then cached.
  thread_local const std::uint32_t id = static_cast<std::uint32_t>(::syscall(SYS_gettid));
  return id;
}

// v in decimal (any integer type: the device is signed).
template <class Int>
void append_dec(std::string& out, Int v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

// A field of a JSON event or CSV row: what stands before it (the punctuation and the JSON name), then v.
template <class Int>
void append_field(std::string& out, const char* before, Int v) {
  out += before;
  append_dec(out, v);
}

void append_hex(std::string& out, std::uint64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v, 16);
  out.append("0x", 2);
  out.append(buf, r.ptr);
}

void append_padded(std::string& out, std::uint64_t v, int width) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  for (int n = static_cast<int>(r.ptr - buf); n < width; ++n) out.push_back('0');
  out.append(buf, r.ptr);
}

// The time of day of RMM's CSV: HH:MM:SS.uuuuuu from the nanoseconds since midnight.
void append_time_of_day(std::string& out, std::uint64_t day_ns) {
  const std::uint64_t s = day_ns / ns_per_s;
  append_padded(out, s / 3600, 2);
  out += ':';
  append_padded(out, s / 60 % 60, 2);
  out += ':';
  append_padded(out, s % 60, 2);
  out += '.';
  append_padded(out, day_ns % ns_per_s / 1000, 6);
}

void append_json_string(std::string& out, const std::string& s) {
  out.push_back('"');
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  out.push_back('"');
}

std::string iso8601_now() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  std::tm tm{};
  gmtime_r(&ts.tv_sec, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::string out = buf;
  out += '.';
  append_padded(out, static_cast<std::uint64_t>(ts.tv_nsec) / 1000000, 3);
  out += 'Z';
  return out;
}

// An action's name in each format: gpumem's JSONL and RMM's CSV (logging_resource_adaptor's names).
struct action_names {
  const char* json;
  const char* rmm;
};

action_names names_of(trace_action a) {
  switch (a) {
    case trace_action::alloc: return {"alloc", "allocate"};
    case trace_action::free: return {"free", "free"};
    case trace_action::oom: return {"oom", "allocate failure"};
  }
  return {"alloc", "allocate"};
}

}  // namespace

trace_format trace_format_for_path(const std::string& path) {
  if (path.size() >= 4) {
    std::string ext = path.substr(path.size() - 4);
    for (char& c : ext) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    if (ext == ".csv") return trace_format::rmm_csv;
  }
  return trace_format::jsonl;
}

std::string json_quote(const std::string& s) {
  std::string out;
  append_json_string(out, s);
  return out;
}

const char* trace_format_name(trace_format f) { return f == trace_format::rmm_csv ? "rmm-csv" : "jsonl"; }

trace_recorder::~trace_recorder() {
  if (forked_.load()) {
    // The thread object names a thread of the parent process; there is nothing to join.
    if (writer_.joinable()) writer_.detach();
    return;
  }
  std::uint64_t events = 0;
  std::string error;
  if (writer_.joinable()) stop(events, error);
}

bool trace_recorder::start(const trace_options& options, std::string& error) {
  if (forked_.load()) {
    error = "gpumem: cannot record a trace in a process forked from the recording one";
    return false;
  }
  std::lock_guard<std::mutex> control(control_mutex_);
  if (writer_.joinable()) {
    error = "gpumem: already recording a trace to '" + path() + "'; stop that one first";
    return false;
  }
  if (options.path.empty()) {
    error = "gpumem: the trace file name is empty";
    return false;
  }
  if (options.buffer_events == 0) {
    error = "gpumem: the trace buffer must hold at least one event";
    return false;
  }
  if (!options.workload_json.empty() &&
      (options.workload_json.front() != '{' || options.workload_json.back() != '}')) {
    error = "gpumem: the trace's workload must be a JSON object";
    return false;
  }
  try {
    storage_[0].reset(new event[options.buffer_events]);
    storage_[1].reset(new event[options.buffer_events]);
  } catch (const std::bad_alloc&) {
    storage_[0].reset();
    storage_[1].reset();
    error = "gpumem: not enough host memory for the trace buffers (" + std::to_string(options.buffer_events) +
            " events each)";
    return false;
  }

  // The trace goes to a temporary file beside the target, renamed over it by stop(): a failed or
  // interrupted recording never leaves a truncated trace under the name asked for.
  if (!out_.open(options.path, error)) {
    storage_[0].reset();
    storage_[1].reset();
    return false;
  }
  fd_ = out_.fd();
  format_ = options.format;
  written_ = 0;
  base_ns_ = 0;
  failed_ = false;
  count_offset_ = -1;
  text_.clear();
  text_.reserve(text_chunk + 256);

  // For CSV's time of day: the local time now, matched to the monotonic clock the events carry.
  start_mono_ns_ = monotonic_ns();
  {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    std::tm tm{};
    localtime_r(&ts.tv_sec, &tm);
    start_day_ns_ = (static_cast<std::uint64_t>(tm.tm_hour) * 3600 + tm.tm_min * 60 + tm.tm_sec) * ns_per_s +
                    static_cast<std::uint64_t>(ts.tv_nsec);
  }

  std::string header;
  if (format_ == trace_format::jsonl) {
    header = "{\"format\":\"gpumem-trace\",\"version\":1,\"source\":";
    append_json_string(header, options.source);
    if (!options.allocator.empty()) {
      header += ",\"allocator\":";
      append_json_string(header, options.allocator);
    }
    header += ",\"device\":";
    append_json_string(header, options.device);
    header += ",\"createdAt\":";
    append_json_string(header, iso8601_now());
    if (!options.workload_json.empty()) header += ",\"workload\":" + options.workload_json;
    if (options.named_frames == 0) {
      // Events carry no tag: every event is tag 0.
      header += ",\"tags\":[\"other\"]";
      count_offset_ = static_cast<long long>(header.size());
      count_space_ = count_space;
      header.append(count_space_, ' ');
    } else {
      // stop() writes the tag names and the count over `,"tags":["other"]` and the blank space
      // after it; a trace cut short keeps this list, so its tags read as "other".
      const std::string cut_short = ",\"tags\":[\"other\"]";
      count_offset_ = static_cast<long long>(header.size());
      count_space_ = 1 + frame_tags::header_bytes(options.named_frames) + count_space;
      header += cut_short;
      header.append(count_space_ - cut_short.size(), ' ');
    }
    header += "}\n";
  } else {
    header = "Thread,Time,Action,Pointer,Size,Stream\n";
  }
  std::string write_error;
  if (!write_all(header.data(), header.size(), write_error)) {
    error = "gpumem: cannot write the trace file '" + options.path + "': " + write_error;
    out_.discard();
    fd_ = -1;
    storage_[0].reset();
    storage_[1].reset();
    return false;
  }

  {
    std::lock_guard<std::mutex> lock(mutex_);
    capacity_ = options.buffer_events;
    filling_ = storage_[0].get();
    spare_ = storage_[1].get();
    pending_ = nullptr;
    filled_ = 0;
    pending_count_ = 0;
    recorded_ = 0;
    stopping_ = false;
    error_.clear();
    path_ = options.path;
    recording_ = true;
  }
  try {
    writer_ = std::thread([this] { writer_loop(); });
  } catch (const std::system_error& e) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      recording_ = false;
    }
    out_.discard();
    fd_ = -1;
    storage_[0].reset();
    storage_[1].reset();
    error = std::string("gpumem: cannot start the trace writer thread: ") + e.what();
    return false;
  }
  const bool frames = format_ == trace_format::jsonl && options.named_frames > 0;
  if (frames) tags_.reset(options.named_frames);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  frames_.store(frames, std::memory_order_relaxed);
  active_.store(true, std::memory_order_release);
  return true;
}

std::uint32_t trace_recorder::intern_frame(std::uint64_t generation, const char* name) {
  if (!frames_.load(std::memory_order_relaxed) || generation != generation_.load(std::memory_order_acquire)) return 0;
  return tags_.intern(name);
}

void trace_recorder::hand_off_locked() noexcept {
  pending_ = filling_;
  pending_count_ = filled_;
  filling_ = spare_;
  spare_ = nullptr;
  filled_ = 0;
  writer_wake_.notify_one();
}

void trace_recorder::record(trace_action action, std::uint64_t ptr, std::uint64_t bytes, std::uint64_t stream,
                            int device, std::uint32_t tag, std::uint64_t generation) noexcept {
  if (!active_.load(std::memory_order_relaxed)) return;
  const std::uint32_t tid = thread_id();
  std::unique_lock<std::mutex> lock(mutex_);
  if (!recording_) return;
  if (filled_ == capacity_) {
    // Both buffers are full: wait for the writer (the file is slower than the allocations).
    buffer_free_.wait(lock, [this] { return spare_ != nullptr || !recording_; });
    if (!recording_) return;
    hand_off_locked();
  }
  // The time is read under the lock, so times never decrease along the file.
  event& e = filling_[filled_++];
  e.time_ns = monotonic_ns();
  e.ptr = ptr;
  e.bytes = bytes;
  e.stream = stream;
  e.thread = tid;
  if (tag != 0 && (tag >= frame_tags::max_distinct || generation != generation_.load(std::memory_order_relaxed))) tag = 0;
  e.tag = static_cast<std::uint16_t>(tag);
  if (action == trace_action::alloc) tags_.count(tag, bytes);
  e.device = static_cast<std::int8_t>(device);
  e.action = action;
  ++recorded_;
  if (filled_ == capacity_ && spare_ != nullptr) hand_off_locked();
}

void trace_recorder::writer_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    writer_wake_.wait(lock, [this] { return pending_ != nullptr || stopping_; });
    if (pending_ == nullptr) return;  // stopping, and everything handed over is written
    event* buffer = pending_;
    const std::size_t count = pending_count_;
    pending_ = nullptr;
    lock.unlock();
    if (!failed_) {
      std::string error;
      if (!write_events(buffer, count, error)) fail(error);
    }
    lock.lock();
    spare_ = buffer;
    buffer_free_.notify_all();
  }
}

bool trace_recorder::write_events(const event* events, std::size_t count, std::string& error) {
  if (written_ == 0 && count > 0) base_ns_ = events[0].time_ns;
  for (std::size_t i = 0; i < count; ++i) {
    const event& e = events[i];
    if (format_ == trace_format::jsonl) {
      // The fields of `gpumem record`'s events, plus the device and the thread.
      append_field(text_, "{\"timeNs\":", e.time_ns - base_ns_);
      text_ += ",\"action\":\"";
      text_ += names_of(e.action).json;
      append_field(text_, "\",\"ptr\":", e.ptr);
      append_field(text_, ",\"bytes\":", e.bytes);
      append_field(text_, ",\"stream\":", e.stream);
      append_field(text_, ",\"tag\":", e.tag);
      append_field(text_, ",\"device\":", e.device);
      append_field(text_, ",\"thread\":", e.thread);
      text_ += "}\n";
    } else {
      append_dec(text_, e.thread);
      text_ += ',';
      append_time_of_day(text_, (start_day_ns_ + (e.time_ns - start_mono_ns_)) % ns_per_day);
      text_ += ',';
      text_ += names_of(e.action).rmm;
      text_ += ',';
      append_hex(text_, e.ptr);
      append_field(text_, ",", e.bytes);
      text_ += ',';
      append_hex(text_, e.stream);
      text_ += '\n';
    }
    if (text_.size() >= text_chunk) {
      if (!write_all(text_.data(), text_.size(), error)) return false;
      text_.clear();
    }
  }
  if (!text_.empty()) {
    if (!write_all(text_.data(), text_.size(), error)) return false;
    text_.clear();
  }
  written_ += count;
  return true;
}

bool trace_recorder::write_all(const char* data, std::size_t size, std::string& error) {
  while (size > 0) {
    const ssize_t n = ::write(fd_, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      error = std::strerror(errno);
      return false;
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

void trace_recorder::fail(const std::string& message) {
  failed_ = true;
  std::string full;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    full = "gpumem: writing the trace file '" + path_ + "' failed: " + message + "; recording stopped after " +
           std::to_string(written_) + " events; the file is left as it was";
    error_ = full;
    recording_ = false;
    active_.store(false, std::memory_order_relaxed);
    buffer_free_.notify_all();
  }
  // Said once, where the user sees it: the program goes on without the trace.
  std::fprintf(stderr, "%s\n", full.c_str());
}

bool trace_recorder::stop(std::uint64_t& events, std::string& error) {
  events = 0;
  if (forked_.load()) {
    error = "gpumem: the trace belongs to the parent process";
    return false;
  }
  std::lock_guard<std::mutex> control(control_mutex_);
  std::unique_lock<std::mutex> lock(mutex_);
  if (!writer_.joinable()) {
    error = "gpumem: no trace is being recorded";
    return false;
  }
  recording_ = false;
  active_.store(false, std::memory_order_relaxed);
  const bool frames = frames_.exchange(false, std::memory_order_relaxed);
  buffer_free_.notify_all();  // callers waiting for a buffer give up
  // The writer gives back the buffer it holds; then the partly filled one is the last to write.
  buffer_free_.wait(lock, [this] { return spare_ != nullptr; });
  if (filled_ > 0) hand_off_locked();
  stopping_ = true;
  writer_wake_.notify_one();
  lock.unlock();
  writer_.join();

  bool ok = !failed_;
  std::string message;
  if (ok && format_ == trace_format::jsonl && count_offset_ >= 0) {
    std::string count = frames ? "," + tags_.header_field() : std::string();
    count += ",\"eventCount\":";
    append_dec(count, written_);
    if (count.size() > count_space_) count = ",\"tags\":[\"other\"],\"eventCount\":" + std::to_string(written_);  // sized at start: never
    count.resize(count_space_, ' ');
    const ssize_t n = ::pwrite(fd_, count.data(), count.size(), static_cast<off_t>(count_offset_));
    if (n != static_cast<ssize_t>(count.size())) {
      ok = false;
      message = "gpumem: writing the trace file '" + path_ + "' failed: " +
                (n < 0 ? std::strerror(errno) : "short write") + " (header)";
    }
  }
  // Complete: synced and renamed over the target. Failed: the partial trace is removed, and the
  // target keeps what it held before.
  if (ok && !failed_) {
    std::string commit_error;
    if (!out_.commit(commit_error)) {
      ok = false;
      message = commit_error;
    }
  } else {
    out_.discard();
  }
  fd_ = -1;
  lock.lock();
  if (failed_) message = error_;
  stopping_ = false;
  filling_ = spare_ = pending_ = nullptr;
  filled_ = pending_count_ = 0;
  capacity_ = 0;
  storage_[0].reset();
  storage_[1].reset();
  events = written_;
  if (!ok) error = message;
  return ok;
}

std::string trace_recorder::path() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return path_;
}

std::uint64_t trace_recorder::event_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return recorded_;
}

void trace_recorder::abandon_after_fork() noexcept {
  forked_.store(true);
  active_.store(false);
  out_.abandon();
}

}  // namespace gpumem::torch
