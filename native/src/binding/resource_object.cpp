#include "resource_object.hpp"

#include <mutex>
#include <string>
#include <unordered_map>

#include "convert.hpp"
#include "gpumem/async_resource.hpp"
#include "gpumem/bench.hpp"
#include "gpumem/cuda_resource.hpp"
#include "gpumem/device.hpp"
#include "gpumem/fault_injecting_adaptor.hpp"
#include "gpumem/host_resource.hpp"
#include "gpumem/limiting_adaptor.hpp"
#include "gpumem/managed_resource.hpp"
#include "gpumem/pool_resource.hpp"
#include "gpumem/prefetch_adaptor.hpp"
#include "gpumem/replay.hpp"
#include "gpumem/statistics_adaptor.hpp"
#include "gpumem/test_kernels.hpp"

namespace gpumem::binding {
namespace {

advise_target to_advise(const std::string& v) {
  if (v == "device") return advise_target::device;
  if (v == "host") return advise_target::host;
  if (v == "none") return advise_target::none;
  throw invalid_argument(invalid_argument::kind::range, "advise", "Expected advise target 'device', 'host' or 'none' but received '" + v + "'");
}

const char* kind_name(memory_kind k) {
  switch (k) {
    case memory_kind::host: return "host";
    case memory_kind::device: return "device";
    case memory_kind::managed: return "managed";
  }
  return "host";
}

// Builds the layers of `spec` bottom-up into `layers`; returns the top one.
memory_resource& build(const Napi::Object& spec, std::vector<std::unique_ptr<memory_resource>>& layers,
                       tracking_adaptor*& tracker) {
  const std::string type = get_string(spec, "type", "");
  const int device = static_cast<int>(get_u64(spec, "device", 0));
  auto upstream = [&]() -> memory_resource& {
    Napi::Value up = spec.Get("upstream");
    if (!up.IsObject()) throw invalid_argument(invalid_argument::kind::type, "upstream", "Expected an upstream spec object for a '" + type + "' layer");
    return build(up.As<Napi::Object>(), layers, tracker);
  };
  std::unique_ptr<memory_resource> layer;
  if (type == "host") {
    layer = std::make_unique<host_resource>();
  } else if (type == "cuda") {
    layer = std::make_unique<cuda_resource>(device);
  } else if (type == "managed") {
    managed_options o;
    o.preferred_location = to_advise(get_string(spec, "preferredLocation", "none"));
    o.accessed_by = to_advise(get_string(spec, "accessedBy", "none"));
    o.read_mostly = get_bool(spec, "readMostly", false);
    layer = std::make_unique<managed_resource>(device, o);
  } else if (type == "async") {
    async_options o;
    o.release_threshold = get_u64(spec, "releaseThreshold", o.release_threshold);
    layer = std::make_unique<async_resource>(device, o);
  } else if (type == "pool") {
    memory_resource& up = upstream();
    pool_options o;
    o.max_reserved_bytes = get_u64(spec, "maxReservedBytes", 0);
    o.small_request_limit = get_u64(spec, "smallRequestLimit", o.small_request_limit);
    o.small_segment_bytes = get_u64(spec, "smallSegmentBytes", o.small_segment_bytes);
    o.large_segment_rounding = get_u64(spec, "largeSegmentRounding", o.large_segment_rounding);
    layer = std::make_unique<pool_resource>(up, o);
  } else if (type == "limit") {
    memory_resource& up = upstream();
    layer = std::make_unique<limiting_adaptor>(up, get_u64(spec, "limitBytes", 0));
  } else if (type == "fault") {
    memory_resource& up = upstream();
    fault_options o;
    o.fail_every = get_u64(spec, "failEvery", o.fail_every);
    o.fail_after_bytes = get_u64(spec, "failAfterBytes", o.fail_after_bytes);
    layer = std::make_unique<fault_injecting_adaptor>(up, o);
  } else if (type == "prefetch") {
    memory_resource& up = upstream();
    layer = std::make_unique<prefetch_adaptor>(up);
  } else if (type == "statistics") {
    memory_resource& up = upstream();
    layer = std::make_unique<statistics_adaptor>(up);
  } else if (type == "track") {
    memory_resource& up = upstream();
    auto t = std::make_unique<tracking_adaptor>(up, get_u64(spec, "capacity", 1u << 20));
    tracker = t.get();
    layer = std::move(t);
  } else {
    throw invalid_argument(invalid_argument::kind::range, "type",
                           "Expected a resource type (host, cuda, managed, async, pool, limit, fault, prefetch, statistics, track) but received '" + type + "'");
  }
  layers.push_back(std::move(layer));
  return *layers.back();
}

// Bytes and data pointer of an ArrayBufferView.
std::pair<std::uint8_t*, std::size_t> view_bytes(const Napi::Value& v) {
  if (v.IsTypedArray()) {
    auto ta = v.As<Napi::TypedArray>();
    return {static_cast<std::uint8_t*>(ta.ArrayBuffer().Data()) + ta.ByteOffset(), ta.ByteLength()};
  }
  if (v.IsDataView()) {
    auto dv = v.As<Napi::DataView>();
    return {static_cast<std::uint8_t*>(dv.ArrayBuffer().Data()) + dv.ByteOffset(), dv.ByteLength()};
  }
  throw invalid_argument(invalid_argument::kind::type, "data", "Expected data to be a TypedArray, Buffer or DataView");
}

// Checks that [ptr + offset, + bytes) lies inside one live allocation of `r`.
void check_range(memory_resource& r, void* ptr, std::uint64_t offset, std::uint64_t bytes) {
  std::size_t size = r.allocation_size(ptr);
  if (size == 0) throw_unknown_pointer(ptr);
  if (offset > size || bytes > size - offset) {
    throw invalid_argument(invalid_argument::kind::range, "offset",
                           "Expected offset + length <= " + std::to_string(size) + " (the allocation's size) but received offset " +
                               std::to_string(offset) + " and length " + std::to_string(bytes));
  }
}

}  // namespace

Napi::Function ResourceObject::Define(Napi::Env env) {
  return DefineClass(env, "Resource",
                     {InstanceMethod<&ResourceObject::Prefetch>("prefetch"),
                      InstanceMethod<&ResourceObject::RecordStream>("recordStream"),
                      InstanceMethod<&ResourceObject::Stats>("stats"),
                      InstanceMethod<&ResourceObject::ResetPeak>("resetPeak"),
                      InstanceMethod<&ResourceObject::Trim>("trim"),
                      InstanceMethod<&ResourceObject::AllocationSize>("allocationSize"),
                      InstanceMethod<&ResourceObject::Write>("write"),
                      InstanceMethod<&ResourceObject::Read>("read"),
                      InstanceMethod<&ResourceObject::Dispose>("dispose"),
                      InstanceMethod<&ResourceObject::Describe>("describe"),
                      InstanceMethod<&ResourceObject::TrackingEvents>("trackingEvents"),
                      InstanceMethod<&ResourceObject::SetTrackingTag>("setTrackingTag"),
                      InstanceMethod<&ResourceObject::SetTrackingEnabled>("setTrackingEnabled"),
                      InstanceMethod<&ResourceObject::BenchPairs>("benchPairs"),
                      InstanceMethod<&ResourceObject::BenchTrace>("benchTrace"),
                      InstanceMethod<&ResourceObject::Replay>("replay"),
                      InstanceMethod<&ResourceObject::FillU32>("fillU32"),
                      InstanceMethod<&ResourceObject::SumU32>("sumU32"),
                      InstanceMethod<&ResourceObject::FastPath>("fastPath"),
                      InstanceMethod<&ResourceObject::ShareHandle>("shareHandle")});
}

ResourceObject::ResourceObject(const Napi::CallbackInfo& info) : Napi::ObjectWrap<ResourceObject>(info) {
  guarded(info.Env(), [&] {
    if (!info[0].IsObject()) throw invalid_argument(invalid_argument::kind::type, "spec", "Expected a resource spec object");
    try {
      const Napi::Object spec = info[0].As<Napi::Object>();
      if (get_string(spec, "type", "") == "shared") attach_shared(get_u64(spec, "token", 0));
      else build(spec, layers_, tracker_);
    } catch (...) {
      release_chain();
      throw;
    }
    return 0;
  });
}

ResourceObject::~ResourceObject() { release_chain(); }

void ResourceObject::release_chain() noexcept {
  tracker_ = nullptr;
  release_shared();
  while (!layers_.empty()) layers_.pop_back();  // top first: adaptors before their upstreams
}

memory_resource& ResourceObject::top() {
  if (shared_) return *shared_->layers.back();
  if (layers_.empty()) throw invalid_state("the allocator has been disposed");
  return *layers_.back();
}

Napi::Value ResourceObject::Prefetch(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] {
    bool moved = top().prefetch(to_pointer(info[0]), to_u64(info[1]),
                                info[2].ToBoolean().Value() ? location::device : location::host, to_stream(info[3]));
    return Napi::Boolean::New(info.Env(), moved);
  });
}

Napi::Value ResourceObject::RecordStream(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] {
    top().record_stream(to_pointer(info[0]), to_stream(info[1]));
    return info.Env().Undefined();
  });
}

Napi::Value ResourceObject::Stats(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] { return from_stats(info.Env(), top().stats()); });
}

Napi::Value ResourceObject::ResetPeak(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] {
    top().reset_peak();
    return info.Env().Undefined();
  });
}

Napi::Value ResourceObject::Trim(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] {
    top().trim(info[0].IsUndefined() ? 0 : to_u64(info[0]));
    return info.Env().Undefined();
  });
}

Napi::Value ResourceObject::AllocationSize(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] {
    return Napi::Number::New(info.Env(), static_cast<double>(top().allocation_size(to_pointer(info[0]))));
  });
}

// write(ptr, offset, view, stream) / read(ptr, offset, view, stream): one checked copy between a
// host buffer and [ptr + offset, + view length) of a live allocation.
Napi::Value ResourceObject::Copy(const Napi::CallbackInfo& info, bool to_allocation) {
  return guarded(info.Env(), [&] {
    memory_resource& r = top();
    void* ptr = to_pointer(info[0]);
    std::uint64_t offset = to_u64(info[1]);
    auto [data, bytes] = view_bytes(info[2]);
    check_range(r, ptr, offset, bytes);
    std::uint8_t* target = static_cast<std::uint8_t*>(ptr) + offset;
    if (bytes == 0) return info.Env().Undefined();
    if (to_allocation) copy_to(target, r.kind(), data, bytes, to_stream(info[3]));
    else copy_from(data, target, r.kind(), bytes, to_stream(info[3]));
    return info.Env().Undefined();
  });
}

Napi::Value ResourceObject::Write(const Napi::CallbackInfo& info) { return Copy(info, true); }
Napi::Value ResourceObject::Read(const Napi::CallbackInfo& info) { return Copy(info, false); }

Napi::Value ResourceObject::Dispose(const Napi::CallbackInfo& info) {
  release_chain();
  return info.Env().Undefined();
}

Napi::Value ResourceObject::Describe(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] {
    memory_resource& r = top();
    Napi::Object o = Napi::Object::New(info.Env());
    o.Set("kind", kind_name(r.kind()));
    o.Set("device", Napi::Number::New(info.Env(), r.device()));
    o.Set("tracking", Napi::Boolean::New(info.Env(), tracker_ != nullptr));
    return o;
  });
}

Napi::Value ResourceObject::TrackingEvents(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] {
    Napi::Env env = info.Env();
    top();
    if (tracker_ == nullptr) throw invalid_state("this allocator has no tracking layer (create it with tracking enabled)");
    auto events = tracker_->events(info[0].ToBoolean().Value());
    const std::size_t n = events.size();
    auto time = Napi::Float64Array::New(env, n);
    auto pointer = Napi::Float64Array::New(env, n);
    auto bytes = Napi::Float64Array::New(env, n);
    auto stream = Napi::Float64Array::New(env, n);
    auto reserved = Napi::Float64Array::New(env, n);
    auto tag = Napi::Uint32Array::New(env, n);
    auto action = Napi::Uint8Array::New(env, n);
    for (std::size_t i = 0; i < n; ++i) {
      time[i] = static_cast<double>(events[i].time_ns);
      pointer[i] = static_cast<double>(events[i].pointer);
      bytes[i] = static_cast<double>(events[i].bytes);
      stream[i] = static_cast<double>(events[i].stream);
      reserved[i] = static_cast<double>(events[i].reserved_bytes);
      tag[i] = events[i].tag;
      action[i] = events[i].action;
    }
    Napi::Object o = Napi::Object::New(env);
    o.Set("timeNs", time);
    o.Set("pointer", pointer);
    o.Set("bytes", bytes);
    o.Set("stream", stream);
    o.Set("reservedBytes", reserved);
    o.Set("tag", tag);
    o.Set("action", action);
    o.Set("dropped", Napi::Number::New(env, static_cast<double>(tracker_->dropped())));
    return o;
  });
}

Napi::Value ResourceObject::SetTrackingTag(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] {
    top();
    if (tracker_ != nullptr) tracker_->set_tag(static_cast<std::uint32_t>(to_u64(info[0])));
    return info.Env().Undefined();
  });
}

Napi::Value ResourceObject::SetTrackingEnabled(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] {
    top();
    if (tracker_ != nullptr) tracker_->set_enabled(info[0].ToBoolean().Value());
    return info.Env().Undefined();
  });
}

namespace {
Napi::Object from_timing(Napi::Env env, const bench::timing& t) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("medianNsPerPair", Napi::Number::New(env, t.median_ns_per_pair));
  o.Set("minNsPerPair", Napi::Number::New(env, t.min_ns_per_pair));
  return o;
}
}  // namespace

Napi::Value ResourceObject::BenchPairs(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] {
    auto t = bench::pairs(top(), to_u64(info[0]), to_u64(info[1]), static_cast<int>(to_u64(info[2])), to_stream(info[3]));
    return from_timing(info.Env(), t);
  });
}

Napi::Value ResourceObject::BenchTrace(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] {
    if (!info[0].IsTypedArray() || info[0].As<Napi::TypedArray>().TypedArrayType() != napi_float64_array)
      throw invalid_argument(invalid_argument::kind::type, "sizes", "Expected sizes to be a Float64Array");
    auto sizes_js = info[0].As<Napi::Float64Array>();
    std::vector<std::uint64_t> sizes(sizes_js.ElementLength());
    for (std::size_t i = 0; i < sizes.size(); ++i) sizes[i] = static_cast<std::uint64_t>(sizes_js[i]);
    auto t = bench::trace(top(), sizes.data(), sizes.size(), to_u64(info[1]), static_cast<int>(to_u64(info[2])),
                          to_stream(info[3]));
    return from_timing(info.Env(), t);
  });
}

namespace {
// A typed array argument of the replay program, checked for its type and length.
template <class Array>
Array replay_array(const Napi::Value& v, napi_typedarray_type type, const char* name, const char* expected, std::size_t length) {
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != type)
    throw invalid_argument(invalid_argument::kind::type, name, std::string("Expected ") + name + " to be a " + expected);
  Array a = v.As<Array>();
  if (a.ElementLength() != length)
    throw invalid_argument(invalid_argument::kind::range, name,
                           std::string("Expected ") + name + " to have " + std::to_string(length) + " elements (one per operation) but received " +
                               std::to_string(a.ElementLength()));
  return a;
}
}  // namespace

// replay(action: Uint8Array, slot: Uint32Array, bytes: Float64Array, stream: Float64Array, slots, repeats):
// runs a compiled trace natively (see gpumem/replay.hpp) and returns one record per pass.
Napi::Value ResourceObject::Replay(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] {
    Napi::Env env = info.Env();
    memory_resource& r = top();
    if (!info[0].IsTypedArray()) throw invalid_argument(invalid_argument::kind::type, "action", "Expected action to be a Uint8Array");
    const std::size_t n = info[0].As<Napi::TypedArray>().ElementLength();
    auto action = replay_array<Napi::Uint8Array>(info[0], napi_uint8_array, "action", "Uint8Array", n);
    auto slot = replay_array<Napi::Uint32Array>(info[1], napi_uint32_array, "slot", "Uint32Array", n);
    auto bytes = replay_array<Napi::Float64Array>(info[2], napi_float64_array, "bytes", "Float64Array", n);
    auto stream = replay_array<Napi::Float64Array>(info[3], napi_float64_array, "stream", "Float64Array", n);
    const std::size_t slots = to_u64(info[4]);
    if (slots > n)
      throw invalid_argument(invalid_argument::kind::range, "slots",
                             "Expected slots <= " + std::to_string(n) + " (the number of operations) but received " + std::to_string(slots));
    const int repeats = static_cast<int>(std::min<std::uint64_t>(to_u64(info[5]), 1u << 20));
    std::vector<bench::replay_op> ops(n);
    for (std::size_t i = 0; i < n; ++i) {
      ops[i] = {static_cast<bench::replay_action>(action[i]), slot[i], static_cast<std::uint64_t>(bytes[i]),
                reinterpret_cast<stream_handle>(static_cast<std::uintptr_t>(stream[i]))};
    }
    auto result = bench::replay(r, ops, slots, repeats);
    Napi::Array passes = Napi::Array::New(env, result.passes.size());
    for (std::size_t i = 0; i < result.passes.size(); ++i) {
      const auto& p = result.passes[i];
      Napi::Object o = Napi::Object::New(env);
      o.Set("allocNs", Napi::Number::New(env, p.alloc_ns));
      o.Set("freeNs", Napi::Number::New(env, p.free_ns));
      o.Set("allocs", Napi::Number::New(env, static_cast<double>(p.allocs)));
      o.Set("frees", Napi::Number::New(env, static_cast<double>(p.frees)));
      o.Set("ooms", Napi::Number::New(env, static_cast<double>(p.ooms)));
      o.Set("skippedFrees", Napi::Number::New(env, static_cast<double>(p.skipped_frees)));
      o.Set("end", from_stats(env, p.end));
      passes[i] = o;
    }
    Napi::Object o = Napi::Object::New(env);
    o.Set("passes", passes);
    o.Set("clockOverheadNs", Napi::Number::New(env, result.clock_overhead_ns));
    return o;
  });
}

Napi::Value ResourceObject::FillU32(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] {
    memory_resource& r = top();
    void* ptr = to_pointer(info[0]);
    std::uint64_t count = to_u64(info[1]);
    check_range(r, ptr, 0, count * 4);
    if (r.kind() == memory_kind::host) throw invalid_state("fillU32 runs on a GPU; this allocator holds host memory");
#ifdef GPUMEM_WITH_CUDA
    kernels::fill_u32(ptr, count, static_cast<std::uint32_t>(to_u64(info[2])), to_stream(info[3]));
#endif
    return info.Env().Undefined();
  });
}

// sumU32(ptr, count, outPtr, stream, spinNs): adds the sum of count u32 values at ptr into the u64
// at outPtr, after spinning spinNs nanoseconds on the GPU.
Napi::Value ResourceObject::SumU32(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] {
    memory_resource& r = top();
    void* ptr = to_pointer(info[0]);
    std::uint64_t count = to_u64(info[1]);
    void* out = to_pointer(info[2]);
    check_range(r, ptr, 0, count * 4);
    check_range(r, out, 0, 8);
    if (r.kind() == memory_kind::host) throw invalid_state("sumU32 runs on a GPU; this allocator holds host memory");
#ifdef GPUMEM_WITH_CUDA
    std::uint64_t spin_ns = info[4].IsUndefined() ? 0 : to_u64(info[4]);
    kernels::spin_then_sum_u32(ptr, count, spin_ns, out, to_stream(info[3]));
#endif
    return info.Env().Undefined();
  });
}

Napi::Value ResourceObject::FastPath(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] {
    Napi::Env env = info.Env();
    if (!info[0].IsTypedArray() || info[0].As<Napi::TypedArray>().TypedArrayType() != napi_float64_array ||
        info[0].As<Napi::Float64Array>().ElementLength() < 3) {
      throw invalid_argument(invalid_argument::kind::type, "args", "Expected a Float64Array of at least 3 elements for args");
    }
    auto args = info[0].As<Napi::Float64Array>();
    fast_args_ = args.Data();
    fast_args_ref_ = Napi::Persistent(args);
    napi_value allocate = nullptr, deallocate = nullptr;
    NAPI_THROW_IF_FAILED(env, napi_create_function(env, "allocate", NAPI_AUTO_LENGTH, FastAllocate, this, &allocate),
                         Napi::Value());
    NAPI_THROW_IF_FAILED(env, napi_create_function(env, "deallocate", NAPI_AUTO_LENGTH, FastDeallocate, this, &deallocate),
                         Napi::Value());
    Napi::Object o = Napi::Object::New(env);
    o.Set("allocate", Napi::Value(env, allocate));
    o.Set("deallocate", Napi::Value(env, deallocate));
    return static_cast<Napi::Value>(o);
  });
}

namespace {
// Runs f; a C++ exception becomes a pending JavaScript exception (raw callbacks must not throw).
template <class F>
napi_value run_fast(napi_env env, F&& f) {
  try {
    f();
  } catch (...) {
    try {
      throw_js(Napi::Env(env));
    } catch (const Napi::Error& e) {
      e.ThrowAsJavaScriptException();
    }
  }
  return nullptr;
}
}  // namespace

napi_value ResourceObject::FastAllocate(napi_env env, napi_callback_info info) {
  void* data = nullptr;
  napi_get_cb_info(env, info, nullptr, nullptr, nullptr, &data);
  auto* self = static_cast<ResourceObject*>(data);
  return run_fast(env, [&] {
    double* a = self->fast_args_;
    void* ptr = self->top().allocate(static_cast<std::size_t>(a[0]),
                                     reinterpret_cast<stream_handle>(static_cast<std::uintptr_t>(a[1])));
    a[2] = static_cast<double>(reinterpret_cast<std::uintptr_t>(ptr));
  });
}

napi_value ResourceObject::FastDeallocate(napi_env env, napi_callback_info info) {
  void* data = nullptr;
  napi_get_cb_info(env, info, nullptr, nullptr, nullptr, &data);
  auto* self = static_cast<ResourceObject*>(data);
  return run_fast(env, [&] {
    double* a = self->fast_args_;
    self->top().deallocate(reinterpret_cast<void*>(static_cast<std::uintptr_t>(a[2])), static_cast<std::size_t>(a[0]),
                           reinterpret_cast<stream_handle>(static_cast<std::uintptr_t>(a[1])));
  });
}

// Sharing one chain between threads: a process-wide table from token to chain. It holds weak
// references, so it never keeps a chain alive by itself; a token is revoked when the object that
// issued it lets go, after which no new thread can attach (those attached keep working).
namespace {

struct share_table {
  std::mutex mutex;
  std::unordered_map<std::uint64_t, std::weak_ptr<shared_chain>> chains;
  std::uint64_t next = 1;
};

// Never destroyed: a worker thread's objects may be finalised after the main thread's statics.
share_table& shares() {
  static share_table* table = new share_table();
  return *table;
}

}  // namespace

shared_chain::~shared_chain() {
  while (!layers.empty()) layers.pop_back();  // top first: adaptors before their upstreams
}

Napi::Value ResourceObject::ShareHandle(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] {
    top();  // throws after dispose
    if (!shared_) {
      auto chain = std::make_shared<shared_chain>();
      chain->layers = std::move(layers_);
      layers_.clear();
      chain->tracker = tracker_;
      shared_ = std::move(chain);
    }
    if (share_token_ == 0) {
      share_table& table = shares();
      std::lock_guard<std::mutex> lock(table.mutex);
      share_token_ = table.next++;
      table.chains.emplace(share_token_, shared_);
    }
    return Napi::Number::New(info.Env(), static_cast<double>(share_token_));
  });
}

void ResourceObject::attach_shared(std::uint64_t token) {
  share_table& table = shares();
  std::lock_guard<std::mutex> lock(table.mutex);
  auto it = table.chains.find(token);
  std::shared_ptr<shared_chain> chain = it == table.chains.end() ? nullptr : it->second.lock();
  if (!chain) {
    throw invalid_state("no shared allocator has token " + std::to_string(token) +
                        " (never issued, or the allocator that shared it has been disposed)");
  }
  shared_ = std::move(chain);
  tracker_ = shared_->tracker;
}

void ResourceObject::release_shared() noexcept {
  if (share_token_ != 0) {
    try {
      share_table& table = shares();
      std::lock_guard<std::mutex> lock(table.mutex);
      table.chains.erase(share_token_);
    } catch (...) {
      // a failed lock leaves a weak entry behind, which attaches only while the chain lives
    }
    share_token_ = 0;
  }
  shared_.reset();  // the chain goes with its last holder
}

}  // namespace gpumem::binding
