// The frame tags of a trace recorded with Python frames (gpumem_torch.record(path, frames=True)):
// the names of the allocating user frames ("file:line:function"), interned to small numbers that
// the events carry, and the bytes each allocated, so that the header names the frames that
// allocated the most, as `gpumem replay` does for a PyTorch snapshot's frames.
//
// Bounded: at most `max_distinct` names (later ones are tag 0, "other"), each cut to
// `max_name_bytes`; the header's tag list fits in `header_bytes()`, reserved when recording starts.
// Defined in this header. No Python here: the names come from a hook registered by the Python package (trace_capture.cpp).
#pragma once
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <unordered_map>
#include <vector>

namespace gpumem::torch {

// `s` as a JSON string, quotes included (trace_recorder.cpp).
std::string json_quote(const std::string& s);

class frame_tags {
 public:
  // Distinct names a recording can intern (tag 0, "other", included).
  static constexpr std::uint32_t max_distinct = 1024;
  // The most bytes of a name kept (its end: the line and the function); longer ones start with "...".
  static constexpr std::size_t max_name_bytes = 200;
  // The most tags a header can name (a snapshot's default is 12).
  static constexpr std::uint32_t max_named = 64;
  static constexpr const char* other = "other";

  frame_tags() = default;
  frame_tags(const frame_tags&) = delete;
  frame_tags& operator=(const frame_tags&) = delete;

  // Forgets every name; the next recording names at most `named` tags in its header.
  void reset(std::uint32_t named);

  // The tag of `name` (1 ...), interning it if new; 0 when `name` is empty or the table is full.
  std::uint32_t intern(const char* name);

  // Counts an allocation of `bytes` by `tag` (0 ignored). Lock-free.
  void count(std::uint32_t tag, std::uint64_t bytes) noexcept {
    if (tag != 0 && tag < max_distinct) bytes_[tag].fetch_add(bytes, std::memory_order_relaxed);
  }

  // The header's `"tags":[...]` (no leading comma): tags[k] the name of tag k for the `named` tags
  // that allocated the most bytes (ties by name), "other" for every other tag, and "other" last, so
  // that a reader which takes a tag past the list as the last name takes it as "other".
  std::string header_field() const;

  // The most characters header_field() can return for `named` tags.
  static std::size_t header_bytes(std::uint32_t named);

  std::size_t size() const;  // names interned (tag 0 included)

 private:
  mutable std::mutex mutex_;
  std::uint32_t named_ = 0;
  std::vector<std::string> names_{other};  // by tag
  std::unordered_map<std::string, std::uint32_t> tag_of_;
  std::unique_ptr<std::atomic<std::uint64_t>[]> bytes_{new std::atomic<std::uint64_t>[max_distinct]()};
};

// `name` as a frame tag's name: control characters replaced by '?', cut to the last
// `frame_tags::max_name_bytes` bytes (at a UTF-8 character boundary) after "...".
std::string frame_tag_name(const char* name);

// Defined here, not in a .cpp of its own: the recorder's test builds trace_recorder.cpp alone.
inline std::string frame_tag_name(const char* name) {
  std::size_t size = std::strlen(name);
  const char* start = name;
  std::string out;
  if (size > frame_tags::max_name_bytes) {
    start = name + size - (frame_tags::max_name_bytes - 3);
    while (*start != '\0' && (static_cast<unsigned char>(*start) & 0xC0) == 0x80) ++start;  // a continuation byte
    out = "...";
  }
  for (const char* p = start; *p != '\0'; ++p) out.push_back(static_cast<unsigned char>(*p) < 0x20 ? '?' : *p);
  return out;
}

inline void frame_tags::reset(std::uint32_t named) {
  std::lock_guard<std::mutex> lock(mutex_);
  named_ = std::min(named, max_named);
  names_.assign(1, other);
  tag_of_.clear();
  for (std::uint32_t k = 0; k < max_distinct; ++k) bytes_[k].store(0, std::memory_order_relaxed);
}

inline std::uint32_t frame_tags::intern(const char* name) {
  if (name == nullptr || *name == '\0') return 0;
  std::string key = frame_tag_name(name);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = tag_of_.find(key);
  if (it != tag_of_.end()) return it->second;
  if (names_.size() >= max_distinct) return 0;
  const auto tag = static_cast<std::uint32_t>(names_.size());
  names_.push_back(key);
  tag_of_.emplace(std::move(key), tag);
  return tag;
}

inline std::string frame_tags::header_field() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::uint32_t> order(names_.size() - 1);
  std::iota(order.begin(), order.end(), 1u);
  std::sort(order.begin(), order.end(), [this](std::uint32_t a, std::uint32_t b) {
    const std::uint64_t x = bytes_[a].load(std::memory_order_relaxed);
    const std::uint64_t y = bytes_[b].load(std::memory_order_relaxed);
    return x != y ? x > y : names_[a] < names_[b];
  });
  std::vector<bool> kept(names_.size(), false);
  for (std::size_t k = 0; k < order.size() && k < named_; ++k) {
    if (bytes_[order[k]].load(std::memory_order_relaxed) > 0) kept[order[k]] = true;
  }
  // Up to the last kept tag; the tags after it are past the list (read as "other").
  std::size_t end = 1;
  for (std::size_t t = 1; t < names_.size(); ++t) {
    if (kept[t]) end = t + 1;
  }
  std::string out = "\"tags\":[";
  for (std::size_t t = 0; t < end; ++t) {
    if (t > 0) out += ',';
    out += kept[t] ? json_quote(names_[t]) : std::string("\"other\"");
  }
  if (end > 1) out += ",\"other\"";
  out += ']';
  return out;
}

inline std::size_t frame_tags::header_bytes(std::uint32_t named) {
  // "tags":[ ... ] with every distinct tag "other" and `named` of them full names, each of whose
  // characters escapes to at most two ('"' and '\'; control characters were replaced).
  const std::size_t others = static_cast<std::size_t>(max_distinct + 1) * (std::strlen("\"other\",") );
  return 16 + others + static_cast<std::size_t>(std::min(named, max_named)) * (2 * max_name_bytes + 3);
}

inline std::size_t frame_tags::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return names_.size();
}

}  // namespace gpumem::torch
