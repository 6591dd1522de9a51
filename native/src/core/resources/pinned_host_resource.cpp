#include "gpumem/pinned_host_resource.hpp"

#include <charconv>
#include <fstream>
#include <iterator>
#include <limits>

#include "../cuda_check.hpp"
#include "pool_options.hpp"
#include "gpumem/host_resource.hpp"

namespace gpumem {
namespace {

// The options of strategy 'pinned' in a chain_spec (its descriptor's options_type).
const pinned_spec& own(const chain_spec& spec) { return spec.options<pinned_spec>(); }

constexpr std::uint64_t max_u64 = std::numeric_limits<std::uint64_t>::max();

std::string_view trim_spaces(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// The value of "Key:   12345 kB" in bytes; nullopt when the key is missing or its value malformed.
std::optional<std::uint64_t> meminfo_field(std::string_view text, std::string_view key) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.size() <= key.size() || line.substr(0, key.size()) != key || line[key.size()] != ':') continue;
    std::string_view rest = trim_spaces(line.substr(key.size() + 1));
    std::uint64_t value = 0;
    const auto [next, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), value);
    if (ec != std::errc() || next == rest.data()) return std::nullopt;
    const std::string_view unit = trim_spaces(rest.substr(static_cast<std::size_t>(next - rest.data())));
    if (unit.empty()) return value;
    if (unit != "kB") return std::nullopt;
    if (value > max_u64 / 1024) return std::nullopt;
    return value * 1024;
  }
  return std::nullopt;
}

}  // namespace

std::optional<host_memory_info> parse_meminfo(std::string_view text) {
  const auto total = meminfo_field(text, "MemTotal");
  const auto available = meminfo_field(text, "MemAvailable");
  if (!total || !available) return std::nullopt;
  return host_memory_info{*total, *available};
}

std::optional<host_memory_info> read_host_memory_info() {
  std::ifstream in("/proc/meminfo");
  if (!in) return std::nullopt;
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_meminfo(text);
}

std::uint64_t default_pinned_cap(const host_memory_info& info) noexcept {
  const std::uint64_t reserve = info.total_bytes / 10;
  return info.available_bytes > reserve ? info.available_bytes - reserve : 0;
}

pinned_cap decide_pinned_cap(const pinned_host_options& options, const std::optional<host_memory_info>& host) {
  pinned_cap cap;
  cap.host = host;
  if (!host) {
    if (options.max_pinned_bytes == 0) {
      throw invalid_state(
          "pinned: cannot read MemTotal and MemAvailable from /proc/meminfo to cap the pinned memory; set "
          "maxReservedBytes to say how much host memory may be pinned");
    }
    cap.bytes = options.max_pinned_bytes;
    cap.explicit_cap = true;
    return cap;
  }
  cap.bytes = default_pinned_cap(*host);
  if (options.max_pinned_bytes != 0 && options.max_pinned_bytes <= cap.bytes) {
    cap.bytes = options.max_pinned_bytes;
    cap.explicit_cap = true;
  }
  return cap;
}

std::string pinned_host_resource::describe_cap() const {
  std::string out = "the cap of " + format_bytes_brief(cap_.bytes);
  if (cap_.explicit_cap) {
    out += " set by maxReservedBytes";
    if (cap_.host) out += "; the host had " + format_bytes_brief(cap_.host->available_bytes) + " available at creation";
    return out;
  }
  return out + " (MemAvailable " + format_bytes_brief(cap_.host->available_bytes) + " at creation less 10% of MemTotal " +
         format_bytes_brief(cap_.host->total_bytes) + ")";
}

void pinned_host_resource::throw_oom(std::size_t bytes, const std::string& reason) {
  table_.count_oom();
  throw out_of_memory(reason, bytes, table_.stats());
}

#ifdef GPUMEM_WITH_CUDA

pinned_host_resource::pinned_host_resource(int device, pinned_host_options options) : device_(device) {
  detail::device_scope scope(device);  // validates the device
  int can_map = 0;
  int unified = 0;
  detail::check_cuda(detail::cu::DeviceGetAttribute(&can_map, cudaDevAttrCanMapHostMemory, device), "cudaDeviceGetAttribute");
  detail::check_cuda(detail::cu::DeviceGetAttribute(&unified, cudaDevAttrUnifiedAddressing, device), "cudaDeviceGetAttribute");
  if (!can_map) {
    throw invalid_state("pinned: device " + std::to_string(device) +
                        " cannot map host memory (cudaDevAttrCanMapHostMemory is 0), so kernels could not use pinned memory in place");
  }
  if (!unified) {
    throw invalid_state("pinned: device " + std::to_string(device) +
                        " has no unified addressing (cudaDevAttrUnifiedAddressing is 0): the device pointer of pinned memory would "
                        "differ from its host pointer");
  }
  cap_ = decide_pinned_cap(options, read_host_memory_info());
}

pinned_host_resource::~pinned_host_resource() {
  for (auto& [ptr, reserved] : table_.take_all()) {
    (void)detail::cu::FreeHost(ptr);  // never throw here
  }
}

void* pinned_host_resource::do_allocate(std::size_t bytes, stream_handle) {
  std::uint64_t held = 0;
  bool fits = false;
  {
    std::lock_guard<std::mutex> lock(pinned_mutex_);
    held = pinned_bytes_;
    fits = bytes <= cap_.bytes - pinned_bytes_;  // pinned_bytes_ <= cap_.bytes always
    if (fits) pinned_bytes_ += bytes;            // taken before the driver call: concurrent requests cannot both pass
  }
  if (!fits) {
    throw_oom(bytes, "pinned: " + format_bytes(bytes) + " would pin more than the host has available: " +
                         format_bytes_brief(held) + " pinned already, " + describe_cap());
  }
  void* ptr = nullptr;
  try {
    detail::device_scope scope(device_);
    const CUresult status = detail::cu::HostAlloc(&ptr, bytes, cudaHostAllocMapped | cudaHostAllocPortable);
    if (detail::is_out_of_memory(status)) {
      throw_oom(bytes, "pinned: cudaHostAlloc of " + format_bytes(bytes) + " failed: the host could not pin that much memory");
    }
    detail::check_cuda(status, "cudaHostAlloc");
    void* device_ptr = nullptr;
    const CUresult mapped = detail::cu::HostGetDevicePointer(&device_ptr, ptr, 0);
    if (mapped != CUDA_SUCCESS || device_ptr != ptr) {
      detail::check_cuda(mapped, "cudaHostGetDevicePointer");
      throw invalid_state("pinned: the device pointer of mapped pinned memory (" + format_pointer(device_ptr) +
                          ") differs from its host pointer (" + format_pointer(ptr) +
                          "): kernels could not use it in place (no unified addressing?)");
    }
    table_.add(ptr, bytes, bytes);
  } catch (...) {
    if (ptr != nullptr) (void)detail::cu::FreeHost(ptr);
    std::lock_guard<std::mutex> lock(pinned_mutex_);
    pinned_bytes_ -= bytes;  // nothing stays pinned for this request
    throw;
  }
  return ptr;
}

void pinned_host_resource::do_deallocate(void* ptr, std::size_t bytes, stream_handle) {
  const std::size_t reserved = table_.remove(ptr, bytes);  // validates first; throws changing nothing
  // cudaFreeHost waits for the device: no kernel can still be using the memory once it returns.
  (void)detail::cu::FreeHost(ptr);  // the memory is gone either way
  std::lock_guard<std::mutex> lock(pinned_mutex_);
  pinned_bytes_ -= reserved;
}

#else

pinned_host_resource::pinned_host_resource(int device, pinned_host_options) : device_(device) {
  throw invalid_state("pinned: gpumem was built without CUDA (pinned host memory needs the CUDA runtime)");
}
pinned_host_resource::~pinned_host_resource() = default;
void* pinned_host_resource::do_allocate(std::size_t, stream_handle) { throw invalid_state("pinned: built without CUDA"); }
void pinned_host_resource::do_deallocate(void* ptr, std::size_t bytes, stream_handle) { table_.remove(ptr, bytes); }

#endif

// 'pinned': pool_resource over mapped pinned host memory, or over the host twin (upstream 'host').
const strategy_descriptor& pinned_strategy() {
  static const strategy_descriptor descriptor = [] {
    strategy_descriptor d;
    d.name = "pinned";
    d.driver_needs = {{"cuMemHostAlloc", 2020}, {"cuMemHostGetDevicePointer", 3020}};
    d.description =
        "caching pool over mapped pinned host memory that kernels use in place: 512 B rounding, 2 MiB segments, per-stream "
        "free lists, pins at most what the host has available (host memory without a GPU)";
    d.options_type = &typeid(pinned_spec);
    d.layer = strategy_layer::cache;
    d.wraps = "mapped pinned host memory (upstream 'pinned') or plain host memory (upstream 'host')";
    d.flags.capturable = true;
    d.flags.host_memory = true;
    d.flags.peer_access = true;
    d.options = {choice_option<&pinned_spec::upstream>("upstream", "where the pool's segments come from",
                                                       {{"pinned", pinned_upstream::pinned}, {"host", pinned_upstream::host}})
                     .placement().js_only().label("pool.upstream")};
    for (option_descriptor& o : pool_size_options<&pinned_spec::options>(
             "Cap on reserved bytes. Over pinned memory it lowers the cap on pinned bytes (default: the host's MemAvailable "
             "at creation less 10% of MemTotal); over host memory it is the pool's cap (default: none).")) {
      d.options.push_back(std::move(o));
    }
    d.leaf_name = [](const chain_spec& spec) { return own(spec).upstream == pinned_upstream::pinned ? "pinned" : "host"; };
    d.make_leaf = [](const chain_spec& spec, chain_build&) -> std::unique_ptr<memory_resource> {
      if (own(spec).upstream == pinned_upstream::host) return std::make_unique<host_resource>();
      return std::make_unique<pinned_host_resource>(spec.device, pinned_host_options{own(spec).options.max_reserved_bytes});
    };
    d.layer_name = [](const chain_spec&) -> const char* { return "pool"; };
    // Over the pinned leaf, max_reserved_bytes is the leaf's cap on pinned bytes (see pinned_spec)
    // rather than the pool's, so that a request past it fails saying it would pin more than the host
    // has available; the pool still releases its cached segments and retries once before it fails.
    d.make_layer = [](const chain_spec& spec, chain_build& build) -> std::unique_ptr<memory_resource> {
      pool_options o = own(spec).options;
      if (own(spec).upstream == pinned_upstream::pinned) o.max_reserved_bytes = 0;
      return std::make_unique<pool_resource>(build.chain.top(), o);
    };
    d.no_peer_access = [](const chain_spec& spec) {
      return std::string(own(spec).upstream == pinned_upstream::host ? "'pinned' over upstream 'host' holds plain host memory"
                                                                       : "");
    };
    return d;
  }();
  return descriptor;
}

}  // namespace gpumem
