#include "gpumem/plugin_resource.hpp"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <utility>

#include "../cuda_check.hpp"
#include "../file_kind.hpp"
#include "gpumem/plugin.h"
#include "gpumem/strategy_options.hpp"

namespace gpumem {

namespace {

// The options of strategy 'plugin' in a chain_spec (its descriptor's options_type).
const plugin_spec& own(const chain_spec& spec) { return spec.options<plugin_spec>(); }

}  // namespace

struct plugin_resource::library_handle {
  void* dl = nullptr;
  ~library_handle() {
    if (dl != nullptr) dlclose(dl);
  }
};

namespace {

std::string file_name(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

[[noreturn]] void bad_library(const std::string& path, const std::string& cause) {
  throw invalid_argument(invalid_argument::kind::type, "library", "plugin library '" + path + "': " + cause);
}

// What a path that is not a regular file is, for messages; "" for a regular file or a path that
// cannot be looked at (dlopen then says why it cannot load it).
std::string non_regular_kind(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  const char* kind = detail::non_regular_file_kind(st);
  return kind == nullptr ? "" : kind;
}

std::string message_or(const char* text, const char* fallback) {
  return text != nullptr && *text != '\0' ? std::string(text) : std::string(fallback);
}

#ifdef GPUMEM_WITH_CUDA
// Makes the plug-in's device current for a call (plugin.h promises it); nothing for host memory.
class call_device {
 public:
  explicit call_device(int device) {
    if (device >= 0) scope_.emplace(device);
  }

 private:
  std::optional<detail::device_scope> scope_;
};
#else
class call_device {
 public:
  explicit call_device(int) {}
};
#endif

// Holds the call mutex when the library asked for serialised calls.
class call_lock {
 public:
  call_lock(std::mutex& m, bool serialize) {
    if (serialize) lock_ = std::unique_lock<std::mutex>(m);
  }

 private:
  std::unique_lock<std::mutex> lock_;
};

// The library's statistics over gpumem's own defaults (plugin.h: gpumem_plugin_stats).
gpumem_plugin_stats library_stats(const gpumem_plugin_v1& fns, void* state, std::mutex& m, bool serialize,
                                  const resource_stats& base) {
  gpumem_plugin_stats p{};
  p.reserved_bytes = base.reserved_bytes;
  p.upstream_alloc_count = base.upstream_alloc_count;
  p.upstream_free_count = base.upstream_free_count;
  p.largest_free_block = -1;
  call_lock lock(m, serialize);
  fns.stats(state, &p);
  return p;
}

}  // namespace

plugin_resource::plugin_resource(plugin_options options)
    : options_(std::move(options)), handle_(std::make_unique<library_handle>()) {
  const std::string& path = options_.library;
  if (path.empty()) {
    throw invalid_argument(invalid_argument::kind::type, "library",
                           "Expected a non-empty path for library but received ''");
  }
  if (options_.device < -1) {
    throw invalid_argument(invalid_argument::kind::range, "device",
                           "Expected a CUDA device ordinal or -1 (host memory) for device but received " +
                               std::to_string(options_.device));
  }
#ifndef GPUMEM_WITH_CUDA
  if (options_.device >= 0) {
    throw invalid_state("plugin library '" + path + "': device " + std::to_string(options_.device) +
                        " needs CUDA, and gpumem was built without CUDA (use device -1 for host memory)");
  }
#endif
  // dlopen would wait on a FIFO for a writer that never comes, and read a device without end: a path
  // (one with a slash; a bare name is searched for by dlopen) must name a regular file.
  if (path.find('/') != std::string::npos) {
    const std::string kind = non_regular_kind(path);
    if (!kind.empty()) bad_library(path, "is " + kind + ", not a regular file (a shared library is one)");
  }
  dlerror();  // clear a stale message
  handle_->dl = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle_->dl == nullptr) bad_library(path, "cannot be loaded: " + message_or(dlerror(), "dlopen failed"));

  dlerror();
  void* entry = dlsym(handle_->dl, GPUMEM_PLUGIN_ENTRY_POINT);
  if (entry == nullptr) {
    bad_library(path, std::string("does not export ") + GPUMEM_PLUGIN_ENTRY_POINT +
                          "(), so it is not a gpumem plug-in (see gpumem/plugin.h)");
  }
  const gpumem_plugin_v1* table = nullptr;
  try {
    table = reinterpret_cast<gpumem_plugin_get_fn>(entry)();
  } catch (...) {
    bad_library(path, std::string(GPUMEM_PLUGIN_ENTRY_POINT) + "() threw an exception");
  }
  if (table == nullptr) bad_library(path, std::string(GPUMEM_PLUGIN_ENTRY_POINT) + "() returned NULL");
  if (table->abi_version != GPUMEM_PLUGIN_ABI_VERSION) {
    bad_library(path, "was built for plug-in ABI version " + std::to_string(table->abi_version) +
                          ", but this gpumem supports version " + std::to_string(GPUMEM_PLUGIN_ABI_VERSION) +
                          " (rebuild it against this gpumem's plugin.h)");
  }
  std::string missing;
  if (table->create == nullptr) missing += " create";
  if (table->allocate == nullptr) missing += " allocate";
  if (table->deallocate == nullptr) missing += " deallocate";
  if (table->destroy == nullptr) missing += " destroy";
  if (!missing.empty()) bad_library(path, "its function table lacks the required" + missing);
  table_fns_ = table;
  serialize_ = (table->flags & GPUMEM_PLUGIN_FLAG_SERIALIZE) != 0;

  char error[1024] = {0};
  void* state = nullptr;
  {
    call_device device(options_.device);
    try {
      state = table->create(options_.options.c_str(), options_.device, error, sizeof error);
    } catch (...) {
      state = nullptr;
      if (error[0] == '\0') std::snprintf(error, sizeof error, "create threw an exception");
    }
  }
  error[sizeof error - 1] = '\0';  // a library that ignored error_len still gets a terminated string
  if (state == nullptr) {
    throw invalid_argument(invalid_argument::kind::type, "options",
                           "plugin library '" + path + "': create(options \"" + options_.options + "\", device " +
                               std::to_string(options_.device) + ") failed: " + message_or(error, "no reason given"));
  }
  state_ = state;
  name_ = file_name(path);
  if (table->name != nullptr) {
    try {
      name_ = message_or(table->name(state_), name_.c_str());
    } catch (...) {
    }
  }
}

plugin_resource::~plugin_resource() {
  if (state_ != nullptr) {
    try {
      call_device device(options_.device);
      table_fns_->destroy(state_);
    } catch (...) {
      // destroy never fails by contract; a library that breaks it must not take the process down
    }
  }
  table_.take_all();  // the library gave everything back in destroy
  // handle_ (dlclose) is destroyed after this body, once nothing of the library is used.
}

std::string plugin_resource::prefix() const { return "plugin '" + name_ + "' (" + options_.library + ")"; }

void* plugin_resource::do_allocate(std::size_t bytes, stream_handle stream) {
  void* ptr = nullptr;
  int status = GPUMEM_PLUGIN_ERROR;
  std::string message;
  {
    call_lock lock(call_mutex_, serialize_);
    call_device device(options_.device);
    try {
      status = table_fns_->allocate(state_, bytes, stream, &ptr);
      if (status != GPUMEM_PLUGIN_OK && table_fns_->last_error != nullptr) {
        message = message_or(table_fns_->last_error(state_), "");
      }
    } catch (...) {
      status = GPUMEM_PLUGIN_ERROR;
      message = "allocate threw an exception";
    }
  }
  const std::string detail = message.empty() ? std::string() : ": " + message;
  switch (status) {
    case GPUMEM_PLUGIN_OK: break;
    case GPUMEM_PLUGIN_OUT_OF_MEMORY:
      table_.count_oom();
      throw out_of_memory(prefix() + ": out of memory allocating " + format_bytes(bytes) + detail, bytes, do_stats());
    case GPUMEM_PLUGIN_INVALID_ARGUMENT:
      throw invalid_argument(invalid_argument::kind::range, "bytes",
                             prefix() + ": cannot allocate " + format_bytes(bytes) + detail);
    case GPUMEM_PLUGIN_ERROR:
      throw invalid_state(prefix() + ": allocation of " + format_bytes(bytes) + " failed" + detail);
    default:
      throw invalid_state(prefix() + ": allocate returned the unknown status " + std::to_string(status) + detail);
  }
  // A broken library must not corrupt the accounting: give back what cannot be used, then fail.
  std::string broken;
  if (ptr == nullptr) {
    throw invalid_state(prefix() + ": allocate reported success but returned no pointer");
  } else if (reinterpret_cast<std::uintptr_t>(ptr) % GPUMEM_PLUGIN_ALIGNMENT != 0) {
    broken = "a pointer not aligned to 256 bytes (" + format_pointer(ptr) + ")";
  } else if (table_.size_of(ptr) != 0) {
    throw invalid_state(prefix() + ": allocate returned " + format_pointer(ptr) + ", which is still allocated");
  }
  if (!broken.empty()) {
    call_lock lock(call_mutex_, serialize_);
    call_device device(options_.device);
    table_fns_->deallocate(state_, ptr, bytes, stream);
    throw invalid_state(prefix() + ": allocate returned " + broken);
  }
  table_.add(ptr, bytes, bytes);
  if (table_fns_->stats != nullptr) {
    const gpumem_plugin_stats s = library_stats(*table_fns_, state_, call_mutex_, serialize_, table_.stats());
    std::lock_guard<std::mutex> peak(peak_mutex_);
    if (s.reserved_bytes > peak_reserved_) peak_reserved_ = s.reserved_bytes;
  }
  return ptr;
}

void plugin_resource::do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) {
  table_.remove(ptr, bytes);  // throws invalid_argument, changing nothing, for a bad pointer or size
  try {
    call_lock lock(call_mutex_, serialize_);
    call_device device(options_.device);
    table_fns_->deallocate(state_, ptr, bytes, stream);
  } catch (...) {
    // deallocate never fails by contract; the memory is the library's either way
  }
}

resource_stats plugin_resource::do_stats() const {
  resource_stats s = table_.stats();
  if (table_fns_->stats == nullptr) return s;
  const gpumem_plugin_stats p = library_stats(*table_fns_, state_, call_mutex_, serialize_, s);
  s.reserved_bytes = p.reserved_bytes;
  s.upstream_alloc_count = p.upstream_alloc_count;
  s.upstream_free_count = p.upstream_free_count;
  s.largest_free_block = p.largest_free_block < 0 ? -1 : p.largest_free_block;
  s.segment_count = p.upstream_alloc_count >= p.upstream_free_count ? p.upstream_alloc_count - p.upstream_free_count : 0;
  std::lock_guard<std::mutex> peak(peak_mutex_);
  if (p.reserved_bytes > peak_reserved_) peak_reserved_ = p.reserved_bytes;
  s.peak_reserved_bytes = peak_reserved_;
  return s;
}

void plugin_resource::do_reset_peak() {
  table_.reset_peak();
  if (table_fns_->stats == nullptr) return;
  const gpumem_plugin_stats p = library_stats(*table_fns_, state_, call_mutex_, serialize_, table_.stats());
  std::lock_guard<std::mutex> peak(peak_mutex_);
  peak_reserved_ = p.reserved_bytes;
}

void plugin_resource::do_trim(std::size_t bytes_to_keep) {
  if (table_fns_->trim == nullptr) return;
  call_lock lock(call_mutex_, serialize_);
  call_device device(options_.device);
  table_fns_->trim(state_, bytes_to_keep);
}

// 'plugin' ('native' until it was renamed, still accepted): a plug-in library's strategy
// (gpumem/plugin.h), the leaf alone.
const strategy_descriptor& plugin_strategy() {
  static const strategy_descriptor descriptor = [] {
    strategy_descriptor d;
    d.name = "plugin";
    d.aliases = {"native"};
    d.description = "a strategy from a shared library built against gpumem/plugin.h (options: library, options?, device?)";
    d.options_type = &typeid(plugin_spec);
    d.flags.requires_options = true;
    d.flags.host_device = true;
    d.inline_option = {"library", "path"};  // GPUMEM_ALLOCATOR=plugin:PATH, deprecated

    d.options = {
        text_option<&plugin_spec::library>("library", "the path of the plug-in library (dlopen)")
            .env("GPUMEM_PLUGIN_LIBRARY", "plugin.library").strict().required("<path of a gpumem plug-in library>").unset_text(""),
        text_option<&plugin_spec::options>("options", "'key=value;key=value', passed to the library as is")
            .env("GPUMEM_PLUGIN_OPTIONS", "plugin.options").strict().unset_text(""),
    };
    d.leaf_name = [](const chain_spec&) { return "plugin"; };
    d.make_leaf = [](const chain_spec& spec, chain_build&) -> std::unique_ptr<memory_resource> {
      return std::make_unique<plugin_resource>(plugin_options{own(spec).library, own(spec).options, spec.device});
    };
    d.no_peer_access = [](const chain_spec&) { return std::string("a plug-in's memory is its own"); };
    return d;
  }();
  return descriptor;
}

}  // namespace gpumem
