// Allocation tags (gpumem/sleep.hpp): names interned once per process, a process tag and a
// per-thread tag.
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>

#include "gpumem/errors.hpp"
#include "gpumem/sleep.hpp"

namespace gpumem {
namespace {

struct tag_table {
  std::mutex lock;
  std::deque<std::string> names{std::string("default")};  // by id; a deque keeps references stable
  std::unordered_map<std::string, tag_id> ids{{"default", default_tag}};
};

tag_table& table() {
  static tag_table* t = new tag_table();  // never destroyed: tags may be read during static destruction
  return *t;
}

std::string shown(std::string_view name) {
  std::string out = "'";
  for (const char c : name.substr(0, 40)) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      static const char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 15];
    } else {
      out += c;
    }
  }
  out += name.size() > 40 ? "...'" : "'";
  return out;
}

}  // namespace

tag_id intern_tag(std::string_view name) {
  if (name.empty()) throw invalid_argument(invalid_argument::kind::range, "tag", "Expected a non-empty tag name but received ''");
  if (name.size() > max_tag_length) {
    throw invalid_argument(invalid_argument::kind::range, "tag",
                           "Expected a tag name of at most " + std::to_string(max_tag_length) + " bytes but received " +
                               std::to_string(name.size()) + " bytes (" + shown(name) + ")");
  }
  for (const char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      throw invalid_argument(invalid_argument::kind::range, "tag",
                             "Expected a tag name without NUL or control characters but received " + shown(name));
    }
  }
  tag_table& t = table();
  std::lock_guard<std::mutex> guard(t.lock);
  const std::string key(name);
  if (const auto it = t.ids.find(key); it != t.ids.end()) return it->second;
  const auto id = static_cast<tag_id>(t.names.size());
  t.names.push_back(key);
  t.ids.emplace(key, id);
  return id;
}

std::string tag_name(tag_id id) {
  tag_table& t = table();
  std::lock_guard<std::mutex> guard(t.lock);
  if (id >= t.names.size()) {
    throw invalid_argument(invalid_argument::kind::range, "tag", "No tag has id " + std::to_string(id));
  }
  return t.names[id];
}

tag_id set_process_tag(tag_id tag) noexcept { return detail::process_tag.exchange(tag, std::memory_order_relaxed); }

std::optional<tag_id> set_thread_tag(std::optional<tag_id> tag) noexcept {
  std::optional<tag_id> previous;
  if (detail::thread_tag_set) previous = detail::thread_tag;
  detail::thread_tag_set = tag.has_value();
  detail::thread_tag = tag.value_or(default_tag);
  return previous;
}

const char* sleep_mode_name(sleep_mode mode) noexcept { return mode == sleep_mode::keep ? "keep" : "discard"; }

}  // namespace gpumem
