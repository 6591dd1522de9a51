#include "gpumem/tiered_resource.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gpumem/device.hpp"
#include "gpumem/pinned_host_resource.hpp"  // read_host_memory_info, default_pinned_cap: the host cap
#include "gpumem/strategy_options.hpp"
#include "sleep_engine.hpp"
#include "tiered_impl.hpp"
#include "sleep_options.hpp"

namespace gpumem {

tiered_resource::tiered_resource(std::unique_ptr<vmm> memory, tiered_options options,
                                 std::unique_ptr<stream_ordering> ordering)
    : impl_(std::make_unique<impl>(std::move(memory), options, std::move(ordering))) {}

tiered_resource::~tiered_resource() = default;

void tiered_resource::set_placement(placement_choice choice) noexcept {
  impl_->choice.store(choice, std::memory_order_relaxed);
}
placement_choice tiered_resource::current_placement() const noexcept { return impl_->choice.load(std::memory_order_relaxed); }
placement_choice tiered_resource::configured_placement() const noexcept { return impl_->configured_placement; }

std::uint64_t tiered_resource::device_budget_bytes() const noexcept { return impl_->budget[index(placement::device)]; }
std::uint64_t tiered_resource::host_budget_bytes() const noexcept { return impl_->budget[index(placement::host)]; }
std::size_t tiered_resource::granule_bytes() const noexcept { return impl_->granule; }

std::optional<placement> tiered_resource::tier_of(const void* ptr) const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  const auto p = reinterpret_cast<std::uintptr_t>(ptr);
  auto it = impl_->live.upper_bound(p);
  if (it == impl_->live.begin()) return std::nullopt;
  --it;
  if (p - it->first >= it->second.size) return std::nullopt;
  return it->second.tier;
}

std::size_t tiered_resource::cached_blocks() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->cache.size();
}

std::uint64_t tiered_resource::cached_bytes() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->cached[0] + impl_->cached[1];
}

void* tiered_resource::do_allocate(std::size_t bytes, stream_handle stream) { return impl_->allocate(bytes, stream); }

void tiered_resource::do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) {
  impl_->deallocate(ptr, bytes, stream);
}

void tiered_resource::do_record_stream(void* ptr, stream_handle stream) { impl_->record_stream(ptr, stream); }

bool tiered_resource::do_prefetch(void* ptr, std::size_t bytes, placement to, stream_handle stream) {
  return impl_->prefetch(ptr, bytes, to, stream);
}

resource_stats tiered_resource::do_stats() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->stats();
}

void tiered_resource::do_reset_peak() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->counter.reset_peak();
  impl_->peak_host_allocated = impl_->host_allocated;
  impl_->peak_host_reserved = impl_->reserved[index(placement::host)];
}

void tiered_resource::do_trim(std::size_t bytes_to_keep) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  const std::uint64_t reserved = impl_->counter.get().reserved_bytes;
  if (reserved > bytes_to_keep) impl_->release_cached(nullptr, reserved - bytes_to_keep);
}

std::size_t tiered_resource::do_allocation_size(const void* ptr) const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  auto it = impl_->live.find(reinterpret_cast<std::uintptr_t>(ptr));
  return it == impl_->live.end() ? 0 : it->second.requested;
}

memory_kind tiered_resource::do_kind() const noexcept { return impl_->memory->kind(); }
int tiered_resource::do_device() const noexcept { return impl_->memory->device(); }

sleep_report tiered_resource::do_sleep(const sleep_request& request) { return impl_->sleep(request); }
sleep_report tiered_resource::do_wake(const wake_request& request) { return impl_->wake(request); }

std::vector<tag_state> tiered_resource::do_tag_states() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->tag_states();
}

std::uint64_t tiered_resource::do_backup_pool_bytes() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->engine.pool_bytes();
}

void tiered_resource::do_trim_backup() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->engine.trim();
}

bool tiered_resource::do_read_backup(const void* addr, std::size_t bytes, void* out) const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  // tiered retains no backup at wake: only sleeping tags hold content.
  return impl_->book.read_backup(addr, bytes, out);
}

const void* tiered_resource::do_backup_view(const void* addr, std::size_t bytes) const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->book.backup_view(addr, bytes);
}

void tiered_resource::do_reserve_backup(std::uint64_t bytes) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->engine.reserve_ahead(bytes, impl_->stats());
}

void tiered_resource::do_check_awake(const void* ptr, std::size_t bytes) const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->check_awake(ptr, bytes);
}

namespace {

// Whether a tiered chain's tiers are on the device: asked for, or 'auto' where a GPU is present.
bool tiers_on_device(const chain_spec& spec) {
  const placement_choice b = own(spec).backing;
  return b == placement_choice::device || (b == placement_choice::automatic && device_count() > 0);
}

}  // namespace

// 'tiered': tiered_resource (device memory, then pinned host memory), the leaf alone.
const strategy_descriptor& tiered_strategy() {
  static const strategy_descriptor descriptor = [] {
    strategy_descriptor d;
    d.name = "tiered";
    d.driver_needs = {{"cuMemCreate", 10020},
                       // cuda.h: CU_MEM_LOCATION_TYPE_HOST_NUMA and its device attribute are CUDA 12.2's.
                       {"host-located cuMemCreate (CU_MEM_LOCATION_TYPE_HOST_NUMA)", 12020}};
    d.description =
        "device memory first, then pinned host memory kernels use in place (CUDA VMM, or memfd without a GPU); placement by "
        "tag, prefetch moves blocks between tiers at the same address";
    d.options_type = &typeid(tiered_spec);
    d.flags.spills_to_host = true;
    d.flags.peer_access = true;
    d.flags.sleep = true;

    using O = tiered_options;
    constexpr auto automatic = placement_choice::automatic;
    d.options = {
        choice_option<&tiered_spec::backing>(
            "upstream", "where the tiers come from: CUDA VMM, the host twin, or CUDA VMM when a GPU is present",
            {{"cuda", placement_choice::device}, {"host", placement_choice::host}, {"auto", placement_choice::automatic}})
            .placement().js_only(),
        bytes_option<&tiered_spec::options, &O::device_budget_bytes>(
            "deviceBudgetBytes", "bytes the device tier may hold (unset: the device's free memory less 1 GiB; 0: all on the host)")
            .env("GPUMEM_TIERED_DEVICE_BUDGET", "tiered.device_budget")
            .doc("Bytes the device tier may hold, live and cached blocks (default: the device's free memory when the "
                 "allocator is made, less 1 GiB for the CUDA context and libraries; the host twin: 1 GiB). 0 puts "
                 "everything on the host."),
        bytes_option<&tiered_spec::options, &O::host_budget_bytes>(
            "hostBudgetBytes",
            "bytes the host tier may hold pinned (unset: MemAvailable less 10% of MemTotal, which a value only lowers)")
            .env("GPUMEM_TIERED_HOST_BUDGET", "tiered.host_budget")
            .doc("Bytes the host tier may hold pinned (default and upper bound: the host's available memory when the "
                 "allocator is made less 10% of its total, as the 'pinned' strategy's cap; a value only lowers it)."),
        choice_option<&tiered_spec::options, &O::placement>(
            "placement", "where allocations go when the calling thread chose nothing",
            {{"auto", automatic}, {"device", placement_choice::device}, {"host", placement_choice::host}})
            .env_only().env("GPUMEM_TIERED_PLACEMENT", "tiered.placement"),
    };
    for (option_descriptor& o : sleep_backup_options<&tiered_spec::options, &O::backup_limit_bytes, &O::backup_reserve_bytes>())
      d.options.push_back(std::move(o));
    d.leaf_name = [](const chain_spec&) { return "tiered"; };
    d.make_leaf = [](const chain_spec& spec, chain_build& build) -> std::unique_ptr<memory_resource> {
      auto r = std::make_unique<tiered_resource>(
          tiers_on_device(spec) ? make_device_vmm(spec.device, {"tiered", "upstream 'host'", 0, spec.peer_access, true})
                                : make_host_vmm(),
          own(spec).options);
      build.chain.placer = r.get();
      build.chain.sleeper = r.get();
      return r;
    };
    d.no_peer_access = [](const chain_spec& spec) {
      return std::string(tiers_on_device(spec) ? "" : "'tiered' over the host twin holds host memory");
    };
    return d;
  }();
  return descriptor;
}

}  // namespace gpumem
