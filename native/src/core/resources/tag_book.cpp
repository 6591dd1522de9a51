// The per-tag book of the sleeping strategies (sleep_engine.hpp's tag_book): which tags a resource
// knows, which sleep and how, and the tags a sleep or wake request names.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "gpumem/errors.hpp"
#include "sleep_engine.hpp"

namespace gpumem::detail {

void tag_book::on_allocate(tag_id tag) {
  if (entry* e = find(tag)) {
    if (e->asleep) {
      throw invalid_state("tag '" + tag_name(tag) + "' is asleep: wake it before allocating in it");
    }
    return;
  }
  entry e;
  e.tag = tag;
  entries_.push_back(std::move(e));
}

bool tag_book::asleep(tag_id tag) const noexcept {
  for (const entry& e : entries_) {
    if (e.tag == tag) return e.asleep;
  }
  return false;
}

tag_book::entry* tag_book::find(tag_id tag) noexcept {
  for (entry& e : entries_) {
    if (e.tag == tag) return &e;
  }
  return nullptr;
}

void tag_book::check_known(const std::vector<tag_id>& tags, const char* strategy) const {
  for (const tag_id t : tags) {
    const bool known = std::any_of(entries_.begin(), entries_.end(), [&](const entry& e) { return e.tag == t; });
    if (known) continue;
    std::string list;
    for (const entry& e : entries_) list += (list.empty() ? "'" : ", '") + tag_name(e.tag) + "'";
    std::string name;
    try {
      name = tag_name(t);
    } catch (const invalid_argument&) {
      name = "#" + std::to_string(t);
    }
    throw invalid_argument(invalid_argument::kind::range, "tags",
                           std::string(strategy) + ": no allocation was ever tagged '" + name + "'; the tags it knows: " +
                               (list.empty() ? std::string("none yet") : list));
  }
}

std::vector<std::pair<tag_id, sleep_mode>> tag_book::plan_sleep(const sleep_request& request, sleep_report& report,
                                                                 const char* strategy) const {
  check_known(request.tags, strategy);
  check_known(request.keep, strategy);
  std::vector<std::pair<tag_id, sleep_mode>> plan;
  for (const entry& e : entries_) {
    const bool named = request.tags.empty() ||
                       std::find(request.tags.begin(), request.tags.end(), e.tag) != request.tags.end();
    if (!named) continue;
    if (e.asleep) {
      report.unchanged.push_back(e.tag);
      continue;
    }
    const bool keep = request.keep_all || std::find(request.keep.begin(), request.keep.end(), e.tag) != request.keep.end();
    plan.emplace_back(e.tag, keep ? sleep_mode::keep : sleep_mode::discard);
  }
  return plan;
}

std::vector<tag_id> tag_book::plan_wake(const std::vector<tag_id>& tags, sleep_report& report, const char* strategy) const {
  check_known(tags, strategy);
  std::vector<tag_id> plan;
  for (const entry& e : entries_) {
    const bool named = tags.empty() || std::find(tags.begin(), tags.end(), e.tag) != tags.end();
    if (!named) continue;
    if (!e.asleep) {
      if (!tags.empty()) report.unchanged.push_back(e.tag);
      continue;
    }
    plan.push_back(e.tag);
  }
  return plan;
}

bool tag_book::read_backup(const void* addr, std::size_t bytes, void* out) const noexcept {
  for (const entry& e : entries_) {
    if ((!e.asleep || e.mode == sleep_mode::keep) && e.backup.read(addr, bytes, out)) return true;
  }
  return false;
}

const void* tag_book::backup_view(const void* addr, std::size_t bytes) const noexcept {
  for (const entry& e : entries_) {
    if (e.asleep && e.mode != sleep_mode::keep) continue;
    if (const void* p = e.backup.view(addr, bytes)) return p;
  }
  return nullptr;
}

}  // namespace gpumem::detail
