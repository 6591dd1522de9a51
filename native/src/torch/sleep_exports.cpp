// libgpumem_torch's sleep and wake by tag (gpumem_torch.h): the process tag, and sleep, wake, the
// tags' states and the backup pool of an instance's leaf on one device, through the core's
// sleepable interface (gpumem/sleep.hpp). Reports and states go out as JSON text, the keys those of
// the TypeScript API (deviceBytes, ...).
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "gpumem/errors.hpp"
#include "gpumem/sleep.hpp"
#include "gpumem/strategy_registry.hpp"
#include "gpumem_torch.h"
#include "sleep_target.hpp"
#include "trace_capture.hpp"  // set_last_error, json_quote

namespace {

using namespace gpumem;
using gpumem::torch::set_last_error;

thread_local std::string returned_tag;   // gpumem_set_process_tag / gpumem_current_tag
thread_local std::string returned_json;  // the last report or states of this thread

// The error code of the exception being handled, its message kept for gpumem_last_error.
int fail(const char* call) noexcept {
  try {
    try {
      throw;
    } catch (const out_of_memory& e) {
      set_last_error(std::string("gpumem: ") + call + ": " + e.what());
      return GPUMEM_TORCH_ERR_OUT_OF_MEMORY;
    } catch (const invalid_argument& e) {
      set_last_error(std::string("gpumem: ") + call + ": " + e.what());
      return GPUMEM_TORCH_ERR_ARGUMENT;
    } catch (const invalid_state& e) {
      set_last_error(std::string("gpumem: ") + call + ": " + e.what());
      return GPUMEM_TORCH_ERR_STATE;
    } catch (const std::exception& e) {
      set_last_error(std::string("gpumem: ") + call + ": " + e.what());
      return GPUMEM_TORCH_ERR_CUDA;
    }
  } catch (...) {
    set_last_error(std::string("gpumem: ") + call + " failed");
    return GPUMEM_TORCH_ERR_CUDA;
  }
}

// "expandable, tiered": the strategies PyTorch can use whose leaf sleeps.
std::string sleeping_strategies() {
  std::string out;
  for (const strategy_descriptor* d : strategies()) {
    if (!d->flags.sleep || !d->flags.kernel_memory) continue;
    out += (out.empty() ? "" : ", ") + d->name;
  }
  return out.empty() ? std::string("none in this build") : out;
}

// The target's leaf, or nullptr where nothing was allocated on the device yet. Throws
// invalid_state for a strategy that cannot sleep.
sleepable* leaf_of(const torch::sleep_target& t) {
  if (!t.strategy->flags.sleep) {
    throw invalid_state("strategy '" + t.strategy->name +
                        "' cannot sleep: sleep and wake by tag need a strategy whose memory is mapped through virtual "
                        "memory management (" +
                        sleeping_strategies() + ")");
  }
  return t.sleeper;
}

std::vector<tag_id> tag_ids(const char* const* names, size_t count) {
  std::vector<tag_id> ids;
  if (names == nullptr) return ids;
  ids.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    if (names[i] == nullptr)
      throw invalid_argument(invalid_argument::kind::type, "tags", "Expected a tag name but received NULL");
    ids.push_back(intern_tag(names[i]));
  }
  return ids;
}

// Named tags asked of a device where nothing was allocated yet: none of them is known (the leaf's
// own message, for the case it cannot see).
[[noreturn]] void throw_unknown(const torch::sleep_target& t, int device, const std::vector<tag_id>& tags) {
  throw invalid_argument(invalid_argument::kind::range, "tags",
                         t.strategy->name + ": no allocation was ever tagged '" + tag_name(tags.front()) +
                             "' on device " + std::to_string(device) +
                             "; the tags it knows: none (nothing was allocated there yet)");
}

std::string json_tags(const std::vector<tag_id>& tags) {
  std::string out = "[";
  for (size_t i = 0; i < tags.size(); ++i) out += (i ? "," : "") + torch::json_quote(tag_name(tags[i]));
  return out + "]";
}

std::string json_number(double v) {
  char text[40];
  std::snprintf(text, sizeof text, "%.9g", v);
  return text;
}

// Where a sleep's time went (sleep_timing), for the benchmarks.
std::string json_timing(const sleep_timing& t) {
  return "{\"quiesceSeconds\":" + json_number(t.quiesce_seconds) + ",\"backupWaitSeconds\":" +
         json_number(t.backup_wait_seconds) + ",\"queueSeconds\":" + json_number(t.queue_seconds) +
         ",\"copyWaitSeconds\":" + json_number(t.copy_wait_seconds) + ",\"releaseSeconds\":" +
         json_number(t.release_seconds) + ",\"faultSeconds\":" + json_number(t.fault_seconds) +
         ",\"registerSeconds\":" + json_number(t.register_seconds) + ",\"pooledBytes\":" +
         std::to_string(t.pooled_bytes) + ",\"pinnedBytes\":" + std::to_string(t.pinned_bytes) + "}";
}

// A sleep's report carries its timing; a wake's has none.
std::string json_report(const sleep_report& r, bool timing) {
  return "{\"changed\":" + json_tags(r.changed) + ",\"unchanged\":" + json_tags(r.unchanged) +
         ",\"deviceBytes\":" + std::to_string(r.device_bytes) + ",\"copiedBytes\":" + std::to_string(r.copied_bytes) +
         ",\"seconds\":" + json_number(r.seconds) +
         (timing ? ",\"timing\":" + json_timing(r.timing) : std::string()) + "}";
}

const char* give(std::string text, std::string& slot) {
  slot = std::move(text);
  return slot.c_str();
}

int report_to(const sleep_report& r, const char** out, bool timing = false) {
  const char* text = give(json_report(r, timing), returned_json);
  if (out != nullptr) *out = text;
  set_last_error("");
  return GPUMEM_TORCH_OK;
}

}  // namespace

extern "C" {

GPUMEM_TORCH_API const char* gpumem_set_process_tag(const char* name) {
  try {
    const tag_id tag = name == nullptr ? default_tag : intern_tag(name);
    const tag_id previous = set_process_tag(tag);  // leaves gpumem_last_error as it was: region() ends here
    return give(tag_name(previous), returned_tag);
  } catch (...) {
    fail("gpumem_set_process_tag");
    return nullptr;
  }
}

GPUMEM_TORCH_API const char* gpumem_current_tag(void) {
  try {
    return give(tag_name(current_tag()), returned_tag);
  } catch (...) {
    return "default";
  }
}

GPUMEM_TORCH_API int gpumem_instance_sleep(int k, int device, const char* const* tags, size_t tag_count, int keep_all,
                                           const char* const* keep, size_t keep_count, const char** report) {
  return gpumem_instance_sleep_cache(k, device, tags, tag_count, keep_all, keep, keep_count, 0, report);
}

GPUMEM_TORCH_API int gpumem_instance_sleep_cache(int k, int device, const char* const* tags, size_t tag_count,
                                                 int keep_all, const char* const* keep, size_t keep_count,
                                                 int keep_cache, const char** report) {
  const gpumem_sleep_request request{tags, tag_count, keep_all, keep, keep_count, keep_cache};
  return gpumem_instance_sleep_request(k, device, &request, report);
}

GPUMEM_TORCH_API int gpumem_instance_sleep_request(int k, int device, const gpumem_sleep_request* c_request,
                                                   const char** report) {
  try {
    if (c_request == nullptr) {
      throw invalid_argument(invalid_argument::kind::type, "request", "Expected a sleep request but received NULL");
    }
    torch::sleep_target t;
    if (const int rc = torch::find_sleep_target(k, device, t); rc != GPUMEM_TORCH_OK) return rc;
    // the C request decoded once into the core's
    sleep_request request;
    request.tags = tag_ids(c_request->tags, c_request->tag_count);
    request.keep_all = c_request->keep_all != 0;
    if (!request.keep_all) request.keep = tag_ids(c_request->keep, c_request->keep_count);
    request.keep_cache = c_request->keep_cache != 0;
    sleepable* leaf = leaf_of(t);
    if (leaf == nullptr) {
      if (!request.tags.empty()) throw_unknown(t, device, request.tags);
      return report_to(sleep_report{}, report, true);
    }
    return report_to(leaf->sleep(request), report, true);
  } catch (...) {
    return fail("sleep");
  }
}

GPUMEM_TORCH_API int gpumem_instance_wake(int k, int device, const char* const* tags, size_t tag_count,
                                          const char** report) {
  return gpumem_instance_wake_retain(k, device, tags, tag_count, 0, report);
}

GPUMEM_TORCH_API int gpumem_instance_wake_retain(int k, int device, const char* const* tags, size_t tag_count,
                                                 int retain_backup, const char** report) {
  try {
    torch::sleep_target t;
    if (const int rc = torch::find_sleep_target(k, device, t); rc != GPUMEM_TORCH_OK) return rc;
    const std::vector<tag_id> ids = tag_ids(tags, tag_count);
    sleepable* leaf = leaf_of(t);
    if (leaf == nullptr) {
      if (!ids.empty()) throw_unknown(t, device, ids);
      return report_to(sleep_report{}, report);
    }
    return report_to(leaf->wake(ids, retain_backup != 0), report);
  } catch (...) {
    return fail("wake");
  }
}

GPUMEM_TORCH_API int gpumem_instance_tag_stats(int k, int device, const char** json) {
  try {
    torch::sleep_target t;
    if (const int rc = torch::find_sleep_target(k, device, t); rc != GPUMEM_TORCH_OK) return rc;
    sleepable* leaf = leaf_of(t);
    std::string out = "{\"tags\":[";
    std::uint64_t backup_pool = 0;
    if (leaf != nullptr) {
      const std::vector<tag_state> states = leaf->tag_states();
      for (size_t i = 0; i < states.size(); ++i) {
        const tag_state& s = states[i];
        out += std::string(i ? "," : "") + "{\"tag\":" + torch::json_quote(tag_name(s.tag)) +
               ",\"asleep\":" + (s.asleep ? "true" : "false") + ",\"mode\":\"" + sleep_mode_name(s.mode) +
               "\",\"allocatedBytes\":" + std::to_string(s.allocated_bytes) +
               ",\"deviceBytes\":" + std::to_string(s.device_bytes) +
               ",\"sleptBytes\":" + std::to_string(s.slept_bytes) +
               ",\"backupBytes\":" + std::to_string(s.backup_bytes) + "}";
      }
      backup_pool = leaf->backup_pool_bytes();
    }
    out += "],\"backupPoolBytes\":" + std::to_string(backup_pool) + "}";
    const char* text = give(std::move(out), returned_json);
    if (json != nullptr) *json = text;
    set_last_error("");
    return GPUMEM_TORCH_OK;
  } catch (...) {
    return fail("tag_stats");
  }
}

GPUMEM_TORCH_API int gpumem_instance_trim_backup(int k, int device) {
  try {
    torch::sleep_target t;
    if (const int rc = torch::find_sleep_target(k, device, t); rc != GPUMEM_TORCH_OK) return rc;
    if (sleepable* leaf = leaf_of(t)) leaf->trim_backup();
    set_last_error("");
    return GPUMEM_TORCH_OK;
  } catch (...) {
    return fail("trim_backup");
  }
}

GPUMEM_TORCH_API int gpumem_instance_read_backup(int k, int device, const void* addr, size_t bytes, void* out,
                                                 int* found) {
  try {
    torch::sleep_target t;
    if (const int rc = torch::find_sleep_target(k, device, t); rc != GPUMEM_TORCH_OK) return rc;
    if (out == nullptr || found == nullptr) {
      throw invalid_argument(invalid_argument::kind::type, "out",
                             "Expected host memory for out and found but received NULL");
    }
    const sleepable* leaf = leaf_of(t);
    *found = leaf != nullptr && leaf->read_backup(addr, bytes, out) ? 1 : 0;
    set_last_error("");
    return GPUMEM_TORCH_OK;
  } catch (...) {
    return fail("read_backup");
  }
}

GPUMEM_TORCH_API int gpumem_instance_backup_view(int k, int device, const void* addr, size_t bytes,
                                                 const void** host) {
  try {
    torch::sleep_target t;
    if (const int rc = torch::find_sleep_target(k, device, t); rc != GPUMEM_TORCH_OK) return rc;
    if (host == nullptr) {
      throw invalid_argument(invalid_argument::kind::type, "host", "Expected host memory for host but received NULL");
    }
    const sleepable* leaf = leaf_of(t);
    *host = leaf != nullptr ? leaf->backup_view(addr, bytes) : nullptr;
    set_last_error("");
    return GPUMEM_TORCH_OK;
  } catch (...) {
    return fail("backup_view");
  }
}

GPUMEM_TORCH_API int gpumem_instance_reserve_backup(int k, int device, uint64_t bytes) {
  try {
    torch::sleep_target t;
    if (const int rc = torch::make_sleep_target(k, device, t); rc != GPUMEM_TORCH_OK) return rc;
    sleepable* leaf = leaf_of(t);
    if (leaf == nullptr) {
      throw invalid_state("strategy '" + t.strategy->name + "' has no sleeping leaf on device " + std::to_string(device));
    }
    leaf->reserve_backup(bytes);
    set_last_error("");
    return GPUMEM_TORCH_OK;
  } catch (...) {
    return fail("reserve_backup");
  }
}

GPUMEM_TORCH_API int gpumem_sleep(int device, const char* const* tags, size_t tag_count, int keep_all,
                                  const char* const* keep, size_t keep_count, const char** report) {
  return gpumem_instance_sleep(0, device, tags, tag_count, keep_all, keep, keep_count, report);
}

GPUMEM_TORCH_API int gpumem_wake(int device, const char* const* tags, size_t tag_count, const char** report) {
  return gpumem_instance_wake(0, device, tags, tag_count, report);
}

GPUMEM_TORCH_API int gpumem_tag_stats(int device, const char** json) {
  return gpumem_instance_tag_stats(0, device, json);
}

GPUMEM_TORCH_API int gpumem_trim_backup(int device) { return gpumem_instance_trim_backup(0, device); }

}  // extern "C"
