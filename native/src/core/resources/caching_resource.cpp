#include "gpumem/caching_resource.hpp"

#include "gpumem/address_only.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gpumem/cuda_resource.hpp"
#include "gpumem/errors.hpp"
#include "gpumem/host_resource.hpp"
#include "gpumem/stats.hpp"
#include "gpumem/strategy_options.hpp"
#include "gpumem/strategy_registry.hpp"
#include "vmm_runs.hpp"
#include "caching_impl.hpp"

namespace gpumem {

namespace {

constexpr std::size_t kib = 1024;
constexpr std::size_t mib = 1024 * kib;
constexpr std::size_t roundup_intervals = 16;  // kRoundUpPowerOfTwoIntervals: 1 MiB to 64 GiB

bool power_of_two(std::size_t v) noexcept { return v != 0 && (v & (v - 1)) == 0; }
unsigned log2_floor(std::size_t v) noexcept { return 63u - static_cast<unsigned>(__builtin_clzll(v)); }

[[noreturn]] void bad_divisions(const std::string& text, const std::string& why) {
  throw invalid_argument(invalid_argument::kind::range, "roundupPower2Divisions",
                         "Expected roundupPower2Divisions as a count (4) or counts per interval in MiB "
                         "([256:1,512:2,>:8]) but received '" + text + "': " + why);
}

// A non-negative decimal integer, or nothing.
bool parse_count(const std::string& s, std::size_t& out) {
  if (s.empty() || s.size() > 18) return false;
  std::size_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<std::size_t>(c - '0');
  }
  out = v;
  return true;
}

// roundup_power2_next_division: `size` rounded up to the next of `divisions` equal steps between
// the powers of two around it.
std::size_t roundup_power2_next_division(std::size_t size, std::size_t divisions) {
  if (power_of_two(size)) return size;
  const std::size_t power2_floor = std::size_t{1} << log2_floor(size);
  const std::size_t step = power2_floor >> log2_floor(divisions);
  if (step == 0) return power2_floor << 1;
  const std::size_t floor = size & ~(step - 1);
  return floor == size ? size : floor + step;
}

}  // namespace

std::vector<std::size_t> parse_roundup_power2_divisions(const std::string& text) {
  std::vector<std::size_t> divisions(roundup_intervals, 0);
  // PyTorch's lexer: ',', ':', '[' and ']' are tokens of their own, spaces are dropped.
  std::vector<std::string> tokens;
  std::string word;
  for (char c : text) {
    if (c == ',' || c == ':' || c == '[' || c == ']') {
      if (!word.empty()) tokens.push_back(std::move(word)), word.clear();
      tokens.emplace_back(1, c);
    } else if (c != ' ') {
      word.push_back(c);
    }
  }
  if (!word.empty()) tokens.push_back(word);
  if (tokens.empty()) return divisions;
  if (tokens[0] != "[") {
    std::size_t value = 0;
    if (tokens.size() != 1 || !parse_count(tokens[0], value)) bad_divisions(text, "not a count");
    if (!power_of_two(value)) bad_divisions(text, "the count has to be a power of two");
    std::fill(divisions.begin(), divisions.end(), value);
    return divisions;
  }
  // The per-interval form, with PyTorch's own reading: the first interval given also sets every
  // interval below it, and '>' sets every interval from the last one given (that one included).
  bool first = true;
  std::size_t last_index = 0;
  std::size_t i = 1;
  auto token = [&](std::size_t at) -> const std::string& {
    if (at >= tokens.size()) bad_divisions(text, "it ends early");
    return tokens[at];
  };
  while (token(i) != "]") {
    const std::string& interval = token(i);
    if (token(i + 1) != ":") bad_divisions(text, "expected ':' after '" + interval + "'");
    std::size_t value = 0;
    if (!parse_count(token(i + 2), value)) bad_divisions(text, "'" + token(i + 2) + "' is not a count");
    if (value != 0 && !power_of_two(value)) bad_divisions(text, "each count has to be a power of two or 0");
    if (interval == ">") {
      std::fill(divisions.begin() + static_cast<std::ptrdiff_t>(last_index), divisions.end(), value);
    } else {
      std::size_t mebibytes = 0;
      if (!parse_count(interval, mebibytes) || !power_of_two(mebibytes)) {
        bad_divisions(text, "each interval has to be a power of two (MiB) or '>'");
      }
      const std::size_t index = std::min<std::size_t>(log2_floor(mebibytes), roundup_intervals - 1);
      if (first) {
        std::fill(divisions.begin(), divisions.begin() + static_cast<std::ptrdiff_t>(index), value);
        first = false;
      }
      divisions[index] = value;
      last_index = index;
    }
    i += 3;
    if (token(i) == ",") ++i;
    else if (token(i) != "]") bad_divisions(text, "expected ',' or ']'");
  }
  if (i + 1 != tokens.size()) bad_divisions(text, "text after ']'");
  return divisions;
}

std::size_t caching_round_size(std::size_t bytes, const std::vector<std::size_t>& divisions) {
  constexpr std::size_t block = caching_resource::min_block_bytes;
  if (bytes < block) return block;
  std::size_t n = 0;
  if (!divisions.empty()) {
    const int index = std::clamp(static_cast<int>(log2_floor(bytes)) - 20, 0, static_cast<int>(divisions.size()) - 1);
    n = divisions[static_cast<std::size_t>(index)];
  }
  if (n > 1 && bytes > block * n) return roundup_power2_next_division(bytes, n);
  return block * ((bytes + block - 1) / block);
}

std::size_t caching_allocation_size(std::size_t rounded) {
  if (rounded <= caching_resource::small_size) return caching_resource::small_buffer;
  if (rounded < caching_resource::min_large_alloc) return caching_resource::large_buffer;
  constexpr std::size_t r = caching_resource::round_large;
  return r * ((rounded + r - 1) / r);
}


namespace {

void check_options(const caching_options& o, bool expandable) {
  auto fail = [](const char* field, const std::string& what) {
    throw invalid_argument(invalid_argument::kind::range, field, what);
  };
  if (o.max_split_size_bytes != 0 && o.max_split_size_bytes < caching_resource::large_buffer) {
    fail("maxSplitSizeBytes", "Expected maxSplitSizeBytes of at least 20 MiB (PyTorch's max_split_size_mb >= 20) but received " +
                                  std::to_string(o.max_split_size_bytes));
  }
  if (o.max_non_split_rounding_bytes < caching_resource::large_buffer) {
    fail("maxNonSplitRoundingBytes", "Expected maxNonSplitRoundingBytes of at least 20 MiB but received " +
                                         std::to_string(o.max_non_split_rounding_bytes));
  }
  const double gc = o.garbage_collection_threshold;
  if (!(gc == 0 || (gc > 0 && gc < 1))) {
    fail("garbageCollectionThreshold",
         "Expected garbageCollectionThreshold in (0, 1), or 0 for none, but received " + std::to_string(gc));
  }
  if (o.expandable_segments != expandable) {
    throw invalid_argument(invalid_argument::kind::type, "expandableSegments",
                           expandable ? "Expected expandableSegments true for a caching_resource over physical memory"
                                      : "Expected expandableSegments false for a caching_resource over an upstream resource");
  }
  parse_roundup_power2_divisions(o.roundup_power2_divisions);
}

}  // namespace

caching_resource::caching_resource(memory_resource& upstream, caching_options options, std::unique_ptr<stream_ordering> ordering) {
  check_options(options, false);
  if (!ordering) ordering = make_ordering(upstream.kind(), upstream.device());
  impl_ = std::make_unique<impl>(&upstream, nullptr, options, std::move(ordering));
  add_stream_observer(*impl_);
}

caching_resource::caching_resource(std::unique_ptr<vmm> memory, caching_options options,
                                   std::unique_ptr<stream_ordering> ordering) {
  if (!memory) throw invalid_argument(invalid_argument::kind::type, "memory", "Expected a vmm but received none");
  check_options(options, true);
  if (small_buffer % memory->granule_bytes() != 0) {
    throw invalid_argument(invalid_argument::kind::range, "granuleBytes",
                           "Expected a granule that divides 2 MiB but received " + std::to_string(memory->granule_bytes()));
  }
  if (!ordering) ordering = make_ordering(memory->kind(), memory->device());
  impl_ = std::make_unique<impl>(nullptr, std::move(memory), options, std::move(ordering));
  add_stream_observer(*impl_);
}

caching_resource::~caching_resource() { remove_stream_observer(*impl_); }

const caching_options& caching_resource::options() const noexcept { return impl_->options; }

void* caching_resource::do_allocate(std::size_t bytes, stream_handle stream) {
  std::lock_guard<std::mutex> guard(impl_->lock);
  return impl_->allocate(bytes, stream);
}

void caching_resource::do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) {
  std::lock_guard<std::mutex> guard(impl_->lock);
  impl_->deallocate(ptr, bytes, stream);
}

void caching_resource::do_record_stream(void* ptr, stream_handle stream) {
  std::lock_guard<std::mutex> guard(impl_->lock);
  auto it = impl_->live.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (it == impl_->live.end()) throw_unknown_pointer(ptr);
  std::vector<stream_handle>& uses = it->second->stream_uses;
  if (stream != it->second->stream && std::find(uses.begin(), uses.end(), stream) == uses.end()) uses.push_back(stream);
}

resource_stats caching_resource::do_stats() const {
  std::lock_guard<std::mutex> guard(impl_->lock);
  return impl_->snapshot();
}

void caching_resource::do_reset_peak() {
  std::lock_guard<std::mutex> guard(impl_->lock);
  impl_->counter.reset_peak();
}

// emptyCache: PyTorch's empty_cache releases every cached segment; bytes_to_keep is not one of its
// notions, so any trim releases them all.
void caching_resource::do_trim(std::size_t) {
  std::lock_guard<std::mutex> guard(impl_->lock);
  impl_->release_cached_blocks();
}

std::size_t caching_resource::do_allocation_size(const void* ptr) const {
  std::lock_guard<std::mutex> guard(impl_->lock);
  auto it = impl_->live.find(reinterpret_cast<std::uintptr_t>(ptr));
  return it == impl_->live.end() ? 0 : it->second->requested;
}

memory_kind caching_resource::do_kind() const noexcept {
  return impl_->upstream != nullptr ? impl_->upstream->kind() : impl_->memory->kind();
}

int caching_resource::do_device() const noexcept {
  return impl_->upstream != nullptr ? impl_->upstream->device() : impl_->memory->device();
}

namespace {

const caching_spec& own(const chain_spec& spec) { return spec.options<caching_spec>(); }

}  // namespace

// 'caching': PyTorch's CUDACachingAllocator rules over cudaMalloc (or host memory), or over
// physical memory mapped in pages with expandableSegments.
const strategy_descriptor& caching_strategy() {
  static const strategy_descriptor descriptor = [] {
    strategy_descriptor d;
    d.name = "caching";
    d.driver_needs = {{"cuMemAlloc", 3020}, {"cuEventRecord", 2000}};
    d.description =
        "PyTorch's CUDACachingAllocator rules (rounding, small/large pools, best fit per stream, splitting, "
        "max_split_size, garbage collection, free-and-retry, expandable segments), for replay and as an allocator over "
        "cudaMalloc or host memory";
    d.options_type = &typeid(caching_spec);
    d.layer = strategy_layer::cache;
    d.wraps = "cudaMalloc (upstream 'cuda') or host memory (upstream 'host'); with expandableSegments, CUDA VMM or "
              "host mappings";
    d.flags.capturable = false;  // new segments and expandable pages take driver calls at any time
    d.options = {
        choice_option<&caching_spec::upstream>("upstream", "where the segments come from",
                                               {{"cuda", placement::device}, {"host", placement::host}})
            .placement().js_only().label("caching.upstream"),
        text_option<&caching_spec::options, &caching_options::roundup_power2_divisions>(
            "roundupPower2Divisions", "PyTorch's roundup_power2_divisions: a count (4) or counts per interval in MiB ([256:1,512:2,>:8])")
            .env("GPUMEM_CACHING_ROUNDUP_POWER2_DIVISIONS", "caching.roundup_power2_divisions").unset_text("none"),
        bytes_option<&caching_spec::options, &caching_options::max_split_size_bytes>(
            "maxSplitSizeBytes", "PyTorch's max_split_size_mb in bytes: blocks this large are not split (at least 20 MiB)")
            .positive().unset_at(0)
            .env("GPUMEM_CACHING_MAX_SPLIT_SIZE", "caching.max_split_size").zero_means("unset").unset_text("none"),
        bytes_option<&caching_spec::options, &caching_options::max_non_split_rounding_bytes>(
            "maxNonSplitRoundingBytes", "PyTorch's max_non_split_rounding_mb in bytes: how much larger an oversize cached block may be than a request it serves")
            .positive().js_only(),
        number_option<&caching_spec::options, &caching_options::garbage_collection_threshold>(
            "garbageCollectionThreshold", "PyTorch's garbage_collection_threshold in (0, 1): acts where allowedMemoryBytes is set (0: off)")
            .env("GPUMEM_CACHING_GC_THRESHOLD", "caching.garbage_collection_threshold"),
        bytes_option<&caching_spec::options, &caching_options::allowed_memory_bytes>(
            "allowedMemoryBytes", "set_per_process_memory_fraction in bytes: no segment past it, and the base of garbage collection")
            .positive().unset_at(0)
            .env("GPUMEM_CACHING_ALLOWED_MEMORY", "caching.allowed_memory").zero_means("no cap").unset_text("none"),
        boolean_option<&caching_spec::options, &caching_options::expandable_segments>(
            "expandableSegments", "PyTorch's expandable_segments:True: one range per stream and pool, mapped in 2 MiB / 20 MiB pages")
            .env("GPUMEM_CACHING_EXPANDABLE_SEGMENTS", "caching.expandable_segments"),
        bytes_option<&caching_spec::options, &caching_options::expandable_address_space_bytes>(
            "expandableAddressSpaceBytes", "the virtual range of each expandable segment (unset: 9/8 of the device's memory, 64 GiB on the host)")
            .positive().unset_at(0).js_only(),
    };
    d.leaf_name = [](const chain_spec& spec) -> const char* {
      const bool host = own(spec).upstream == placement::host;
      if (own(spec).options.expandable_segments) return host ? "mmap" : "vmm";
      return host ? "host" : "cuda";
    };
    d.make_leaf = [](const chain_spec& spec, chain_build& build) -> std::unique_ptr<memory_resource> {
      const bool host = own(spec).upstream == placement::host;
      if (own(spec).options.expandable_segments) {
        build.physical = host ? make_host_vmm(caching_resource::small_buffer)
                              : make_device_vmm(spec.device, {"expandable", "upstream 'host'", caching_resource::small_buffer,
                                                              spec.peer_access, false});
        return nullptr;
      }
      if (host) return std::make_unique<host_resource>();
      return std::make_unique<cuda_resource>(spec.device, spec.peer_access);
    };
    // segments and pages are taken and given back, never read or written: address-only memory will do
    // (the doctor's replays), with PyTorch's 2 MiB page and the limit as the device's memory
    d.flags.address_only = true;
    d.make_address_only_leaf = [](const chain_spec& spec, chain_build& build) -> std::unique_ptr<memory_resource> {
      if (own(spec).options.expandable_segments) {
        build.physical = make_address_only_vmm(caching_resource::small_buffer, spec.limit_bytes.value_or(0));
        return nullptr;
      }
      return make_address_only_resource();
    };
    d.layer_name = [](const chain_spec&) -> const char* { return "caching"; };
    d.make_layer = [](const chain_spec& spec, chain_build& build) -> std::unique_ptr<memory_resource> {
      if (own(spec).options.expandable_segments) {
        return std::make_unique<caching_resource>(std::move(build.physical), own(spec).options);
      }
      return std::make_unique<caching_resource>(build.chain.top(), own(spec).options);
    };
    d.validate = [](const chain_spec& spec) { check_options(own(spec).options, own(spec).options.expandable_segments); };
    d.flags.peer_access = true;
    d.no_peer_access = [](const chain_spec& spec) {
      return std::string(own(spec).upstream == placement::host ? "'caching' over upstream 'host' holds host memory" : "");
    };
    return d;
  }();
  return descriptor;
}

}  // namespace gpumem
