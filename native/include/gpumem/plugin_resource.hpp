// A strategy from a shared library that implements the plug-in ABI (gpumem/plugin.h): a leaf
// resource over the library's allocate/deallocate. gpumem keeps the accounting itself (the same
// allocation_table as the other leaves), so statistics are exact and bad frees are rejected before
// the library sees them; the library only adds what gpumem cannot see (reserved bytes, upstream
// calls, the largest free block).
#pragma once
#include <memory>
#include <mutex>
#include <string>

#include "gpumem/detail/allocation_table.hpp"
#include "gpumem/memory_resource.hpp"

struct gpumem_plugin_v1;

namespace gpumem {

struct plugin_options {
  std::string library;  // path given to dlopen
  std::string options;  // "key=value;key=value", passed to the library's create as is
  int device = -1;      // a CUDA ordinal, or -1 for host memory
};

class plugin_resource final : public detail::leaf_resource {
 public:
  // Loads the library and creates its state. Throws invalid_argument (argument "library") for a
  // library that cannot be loaded, lacks the entry point, has another ABI version or an incomplete
  // table; invalid_argument (argument "options") when the library's create fails. Every message
  // names the library's path and the cause.
  explicit plugin_resource(plugin_options options);
  ~plugin_resource() override;  // destroy, then dlclose; never throws

  const std::string& library() const noexcept { return options_.library; }
  // The library's name for itself, or its file name.
  const std::string& plugin_name() const noexcept { return name_; }

 private:
  void* do_allocate(std::size_t bytes, stream_handle stream) override;
  void do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) override;
  resource_stats do_stats() const override;
  void do_reset_peak() override;
  void do_trim(std::size_t bytes_to_keep) override;
  memory_kind do_kind() const noexcept override { return options_.device < 0 ? memory_kind::host : memory_kind::device; }
  int do_device() const noexcept override { return options_.device; }

  std::string prefix() const;  // "plugin 'name' (path)"

  struct library_handle;  // dlopen handle, closed last
  plugin_options options_;
  std::unique_ptr<library_handle> handle_;
  const gpumem_plugin_v1* table_fns_ = nullptr;
  void* state_ = nullptr;
  std::string name_;
  bool serialize_ = false;
  // Held around every library call when the library asks for serialised calls.
  mutable std::mutex call_mutex_;
  // The peak of the library's reserved bytes, sampled after each allocation (it reports only the
  // current value).
  mutable std::mutex peak_mutex_;
  mutable std::uint64_t peak_reserved_ = 0;
};

// Strategy 'plugin': a strategy from a shared library (gpumem/plugin.h); its options in a chain_spec
// (spec.options<plugin_spec>()). Its memory is on `chain_spec::device`, or on the host when that is -1.
struct plugin_spec {
  std::string library;  // the path dlopen is given
  std::string options;  // "key=value;key=value", passed to the library as is
};

}  // namespace gpumem
