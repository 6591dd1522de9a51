#include "gpumem/expandable_resource.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "pool_detail.hpp"
#include "sleep_engine.hpp"
#include "stream_ordered_blocks.hpp"
#include "vmm_runs.hpp"
#include "gpumem/address_only.hpp"
#include "gpumem/strategy_options.hpp"
#include "expandable_impl.hpp"
#include "expandable_hot_path.hpp"
#include "sleep_options.hpp"

namespace gpumem {

namespace {

// Checks the options and fills in the defaults that depend on the memory.
expandable_options resolve(const expandable_options& given, const vmm& memory) {
  expandable_options o = given;
  const std::uint64_t granule = memory.granule_bytes();
  if (!(o.gc_threshold >= 0 && o.gc_threshold <= 1)) {
    bad_option("gcThreshold", "a fraction in (0, 1] (0: off)", std::to_string(o.gc_threshold));
  }
  if (o.reserve_bytes == 0) {
    const std::uint64_t total = memory.total_bytes();
    o.reserve_bytes = total == 0 ? expandable_resource::default_host_reserve : (total + granule - 1) / granule * granule;
  } else if (o.reserve_bytes % granule != 0) {
    bad_option("reserveBytes", "a positive multiple of the granule (" + std::to_string(granule) + ")",
               std::to_string(o.reserve_bytes));
  }
  if (o.reserve_bytes / granule > expandable_resource::max_granules_per_range) {
    bad_option("reserveBytes", "at most " + std::to_string(expandable_resource::max_granules_per_range) +
                                   " granules of " + std::to_string(granule) + " bytes",
               std::to_string(o.reserve_bytes));
  }
  if (o.capacity_bytes == 0) o.capacity_bytes = memory.total_bytes() != 0 ? memory.total_bytes() : o.reserve_bytes;
  return o;
}

}  // namespace

expandable_resource::expandable_resource(std::unique_ptr<vmm> memory, expandable_options options,
                                         std::unique_ptr<stream_ordering> ordering) {
  if (!memory) throw invalid_argument(invalid_argument::kind::type, "memory", "Expected a vmm but received none");
  const expandable_options resolved = resolve(options, *memory);
  if (!ordering) ordering = make_ordering(memory->kind(), memory->device());
  impl_ = std::make_unique<impl>(std::move(memory), resolved, std::move(ordering));
  add_stream_observer(*impl_);
}

expandable_resource::~expandable_resource() { remove_stream_observer(*impl_); }

const expandable_options& expandable_resource::options() const noexcept { return impl_->options; }

std::size_t expandable_resource::granule_bytes() const noexcept { return impl_->granule; }

std::uint64_t expandable_resource::idle_bytes() const {
  std::lock_guard<resource_lock> guard(impl_->lock);
  impl_->process_pending();
  return static_cast<std::uint64_t>(impl_->idle_granules) * impl_->granule;
}

std::size_t expandable_resource::range_count() const {
  std::lock_guard<resource_lock> guard(impl_->lock);
  return impl_->ranges.size();
}

std::size_t expandable_resource::pending_free_blocks() const { return detail::pool::locked_pending_blocks(*impl_); }

void* expandable_resource::do_allocate(std::size_t bytes, stream_handle stream) {
  return detail::pool::locked_allocate(*impl_, bytes, stream);
}

void expandable_resource::do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) {
  detail::pool::locked_deallocate(*impl_, ptr, bytes, stream);
}

void expandable_resource::do_record_stream(void* ptr, stream_handle stream) {
  detail::pool::locked_record_stream(*impl_, ptr, stream);
}

bool expandable_resource::do_prefetch(void* ptr, std::size_t bytes, placement, stream_handle) {
  std::lock_guard<resource_lock> guard(impl_->lock);
  const block* b = impl_->live.at(live_slot(impl_->live, ptr));
  if (bytes > b->requested) throw_size_mismatch(ptr, bytes, b->requested);
  return false;  // device (or host) memory: there is nothing to move
}

resource_stats expandable_resource::do_stats() const { return detail::pool::locked_stats(*impl_); }

void expandable_resource::do_reset_peak() { detail::pool::locked_reset_peak(*impl_); }

void expandable_resource::do_trim(std::size_t bytes_to_keep) {
  std::lock_guard<resource_lock> guard(impl_->lock);
  impl_->process_pending();
  impl_->release_retired_ranges();
  impl_->release_idle({bytes_to_keep, ~std::uint64_t{0}});
}

std::size_t expandable_resource::do_allocation_size(const void* ptr) const {
  return detail::pool::locked_allocation_size(*impl_, ptr);
}

memory_kind expandable_resource::do_kind() const noexcept { return impl_->memory->kind(); }

int expandable_resource::do_device() const noexcept { return impl_->memory->device(); }

sleep_report expandable_resource::do_sleep(const sleep_request& request) {
  std::lock_guard<resource_lock> guard(impl_->lock);
  return impl_->sleep(request);
}

sleep_report expandable_resource::do_wake(const wake_request& request) {
  std::lock_guard<resource_lock> guard(impl_->lock);
  return impl_->wake(request);
}

std::vector<tag_state> expandable_resource::do_tag_states() const {
  std::lock_guard<resource_lock> guard(impl_->lock);
  return impl_->tag_states();
}

std::uint64_t expandable_resource::do_backup_pool_bytes() const {
  std::lock_guard<resource_lock> guard(impl_->lock);
  return impl_->engine.pool_bytes();
}

void expandable_resource::do_trim_backup() {
  std::lock_guard<resource_lock> guard(impl_->lock);
  impl_->engine.trim();
}

bool expandable_resource::do_read_backup(const void* addr, std::size_t bytes, void* out) const {
  std::lock_guard<resource_lock> guard(impl_->lock);
  return impl_->book.read_backup(addr, bytes, out);
}

const void* expandable_resource::do_backup_view(const void* addr, std::size_t bytes) const {
  std::lock_guard<resource_lock> guard(impl_->lock);
  return impl_->book.backup_view(addr, bytes);
}

void expandable_resource::do_reserve_backup(std::uint64_t bytes) {
  std::lock_guard<resource_lock> guard(impl_->lock);
  impl_->engine.reserve_ahead(bytes, impl_->snapshot());
}

void expandable_resource::do_check_awake(const void* ptr, std::size_t bytes) const {
  std::lock_guard<resource_lock> guard(impl_->lock);
  impl_->check_awake(ptr, bytes);
}

namespace {

// Whether an expandable chain maps host memory (the host twin): asked for, or device -1.
bool on_host(const chain_spec& spec) { return own(spec).backing == placement::host || spec.device == -1; }

}  // namespace

// 'expandable': expandable_resource over physical memory (CUDA VMM, or the host twin).
const strategy_descriptor& expandable_strategy() {
  static const strategy_descriptor descriptor = [] {
    strategy_descriptor d;
    d.name = "expandable";
    d.driver_needs = {{"cuMemCreate", 10020}, {"cuMemMap", 10020}, {"cuMemSetAccess", 10020}};
    d.description =
        "expandable segments: a virtual range per stream, physical memory mapped in granules as it grows (CUDA VMM, or "
        "mmap without a GPU)";
    d.options_type = &typeid(expandable_spec);
    d.layer = strategy_layer::cache;
    d.wraps = "physical granules: CUDA VMM on the device (vmm), or host mappings (mmap) with device -1";
    d.flags.peer_access = true;
    d.flags.host_device = true;
    d.flags.sleep = true;

    using O = expandable_options;
    constexpr std::uint64_t keep_all = std::numeric_limits<std::uint64_t>::max();
    d.options = {
        choice_option<&expandable_spec::backing>("upstream", "where the granules come from: CUDA VMM, or host mappings (mmap)",
                                                 {{"cuda", placement::device}, {"host", placement::host}})
            .placement().js_only(),
        bytes_option<&expandable_spec::granule_bytes>("granuleBytes", "the mapping granule (unset: the backing's default)")
            .positive().unset_at(0).js_only()
            .doc("Bytes mapped at a time. cuda: a multiple of the device's minimum granularity (default: its recommended "
                 "granularity, 2 MiB on current GPUs); host: a power of two of at least the page size (default 2 MiB)."),
        bytes_option<&expandable_spec::options, &O::release_threshold>(
            "releaseThreshold", "idle mapped bytes kept; past it, idle granules are unmapped at free (unset: keep everything)")
            .unset_at(keep_all).js_only(),
        number_option<&expandable_spec::options, &O::gc_threshold>(
            "gcThreshold", "before mapping past this fraction of capacityBytes, idle granules are unmapped first (0: off)")
            .js_only()
            .doc("0 < f <= 1: before mapping past f x `capacityBytes`, idle granules are unmapped first (PyTorch's "
                 "garbage_collection_threshold). 0 (the default): off."),
        boolean_option<&expandable_spec::options, &O::unmap_idle_before_growth>(
            "unmapIdleBeforeGrowth",
            "before mapping past the peak of reserved bytes (since resetPeak), idle granules are unmapped first (the "
            "streams that used them synchronised on the host); false: they stay mapped until trim, releaseThreshold or "
            "gcThreshold")
            .env("GPUMEM_EXPANDABLE_UNMAP_IDLE_BEFORE_GROWTH", "expandable.unmap_idle_before_growth")
            .doc("Before mapping past the peak of reserved bytes (since resetPeak()), every stream's idle granules are "
                 "unmapped first (waiting on the host for the streams that used them), so that a request that fits no free "
                 "block reuses the memory of the holes it does not fit instead of holding it beside new granules. false (the "
                 "default): idle granules stay mapped until trim(), `releaseThreshold` or `gcThreshold`. Each such release "
                 "waits for the streams, so it suits one stream whose shapes vary (on an H100 the transformer reserved 1.013x "
                 "its peak allocated with it, 1.08x without, at about the same epoch time) and not streams taking turns (two "
                 "streams unmapped 214 runs a pass: 55.7 µs an allocation against 4.4 µs; bench/RESULTS.md)."),
        bytes_option<&expandable_spec::options, &O::capacity_bytes>(
            "capacityBytes", "what gcThreshold is a fraction of (unset: limitBytes, else the device's memory)")
            .positive().unset_at(0).js_only(),
        bytes_option<&expandable_spec::options, &O::reserve_bytes>(
            "reserveBytes", "the virtual range reserved per stream (unset: the device's memory; the host twin: 64 GiB)")
            .positive().unset_at(0).js_only()
            .doc("The virtual range reserved per stream, a multiple of the granule; no allocation can be larger (default: "
                 "the device's memory rounded up to a granule; host: 64 GiB)."),
    };
    for (option_descriptor& o : sleep_backup_options<&expandable_spec::options, &O::backup_limit_bytes, &O::backup_reserve_bytes>())
      d.options.push_back(std::move(o));
    d.leaf_name = [](const chain_spec& spec) { return on_host(spec) ? "mmap" : "vmm"; };
    d.make_leaf = [](const chain_spec& spec, chain_build& build) -> std::unique_ptr<memory_resource> {
      build.physical = on_host(spec) ? make_host_vmm(own(spec).granule_bytes)
                                     : make_device_vmm(spec.device, {"expandable", "device 'host'", own(spec).granule_bytes,
                                                                     spec.peer_access, false});
      return nullptr;
    };
    // granules mapped into ranges, never read or written: address-only ranges will do, with the
    // granule the leaf would have (2 MiB on the device and the host alike) and the limit as the
    // device's memory (the default range per stream)
    d.flags.address_only = true;
    d.make_address_only_leaf = [](const chain_spec& spec, chain_build& build) -> std::unique_ptr<memory_resource> {
      const std::size_t granule = own(spec).granule_bytes != 0 ? static_cast<std::size_t>(own(spec).granule_bytes) : std::size_t{2} << 20;
      build.physical = make_address_only_vmm(granule, spec.limit_bytes.value_or(0));
      return nullptr;
    };
    d.layer_name = [](const chain_spec&) -> const char* { return "expandable"; };
    d.make_layer = [](const chain_spec& spec, chain_build& build) -> std::unique_ptr<memory_resource> {
      expandable_options o = own(spec).options;
      if (o.capacity_bytes == 0 && spec.limit_bytes) o.capacity_bytes = *spec.limit_bytes;  // the simulated device
      if (spec.address_only) {
        // A replay (the doctor, the out-of-memory report): no host memory pinned for backups, and no
        // range reserved past the simulated device.
        o.backup_reserve_bytes = 0;
        if (spec.limit_bytes && o.reserve_bytes > *spec.limit_bytes) o.reserve_bytes = 0;
      }
      auto r = std::make_unique<expandable_resource>(std::move(build.physical), o);
      if (!spec.address_only) build.chain.sleeper = r.get();  // nothing to back up from addresses alone
      return r;
    };
    d.validate = [](const chain_spec& spec) {
      const double f = own(spec).options.gc_threshold;
      if (!(f >= 0 && f <= 1)) {
        throw invalid_argument(invalid_argument::kind::range, "gcThreshold",
                               "Expected a fraction in (0, 1] (0: off) for gcThreshold but received " + std::to_string(f));
      }
    };
    d.no_peer_access = [](const chain_spec& spec) {
      return std::string(on_host(spec) ? "'expandable' over the host twin holds host memory" : "");
    };
    return d;
  }();
  return descriptor;
}

}  // namespace gpumem
