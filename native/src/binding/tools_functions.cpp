#include "tools_functions.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "convert.hpp"
#include "function_helpers.hpp"
#include "gpumem/bench.hpp"
#include "gpumem/errors.hpp"
#include "gpumem/link_bench.hpp"
#include "gpumem/replay.hpp"
#include "gpumem/stream_ordering.hpp"
#include "gpumem/test_kernels.hpp"
#include "resource_object.hpp"

namespace gpumem::binding {
namespace {

Napi::Object from_timing(Napi::Env env, const bench::timing& t) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("medianNsPerPair", Napi::Number::New(env, t.median_ns_per_pair));
  o.Set("minNsPerPair", Napi::Number::New(env, t.min_ns_per_pair));
  Napi::Array batches = Napi::Array::New(env, t.batch_ns_per_pair.size());
  for (std::size_t i = 0; i < t.batch_ns_per_pair.size(); ++i) batches[i] = Napi::Number::New(env, t.batch_ns_per_pair[i]);
  o.Set("batchNsPerPair", batches);
  return o;
}

// benchPairs(resource, bytes, iterations, repeats, stream)
Napi::Value BenchPairs(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] {
    memory_resource& r = ResourceObject::from(info[0], "allocator").top();
    auto t = bench::pairs(r, to_u64(info[1]), to_u64(info[2]), static_cast<int>(to_u64(info[3])), to_stream(info[4]));
    return from_timing(info.Env(), t);
  });
}

// benchTrace(resource, sizes: Float64Array, window, repeats, stream)
Napi::Value BenchTrace(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] {
    memory_resource& r = ResourceObject::from(info[0], "allocator").top();
    auto sizes_js = typed_array_arg<Napi::Float64Array>(info[1], napi_float64_array, "sizes", "Float64Array");
    std::vector<std::uint64_t> sizes(sizes_js.ElementLength());
    for (std::size_t i = 0; i < sizes.size(); ++i) sizes[i] = static_cast<std::uint64_t>(sizes_js[i]);
    auto t = bench::trace(r, sizes.data(), sizes.size(), to_u64(info[2]), static_cast<int>(to_u64(info[3])),
                          to_stream(info[4]));
    return from_timing(info.Env(), t);
  });
}

// A typed array argument of the replay program, checked for its type and length.
template <class Array>
Array replay_array(const Napi::Value& v, napi_typedarray_type type, const char* name, const char* expected, std::size_t length) {
  Array a = typed_array_arg<Array>(v, type, name, expected);
  if (a.ElementLength() != length)
    throw invalid_argument(invalid_argument::kind::range, name,
                           std::string("Expected ") + name + " to have " + std::to_string(length) + " elements (one per operation) but received " +
                               std::to_string(a.ElementLength()));
  return a;
}

// replay(resource, action: Uint8Array, slot: Uint32Array, bytes: Float64Array, stream: Float64Array, slots, repeats,
// stopAtFirstOom: boolean): runs a compiled trace natively (see gpumem/replay.hpp) and returns one record per pass.
Napi::Value Replay(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] {
    Napi::Env env = info.Env();
    memory_resource& r = ResourceObject::from(info[0], "allocator").top();
    if (!info[1].IsTypedArray())
      throw invalid_argument(invalid_argument::kind::type, "action", "Expected a Uint8Array for action but received " + describe(info[1]));
    const std::size_t n = info[1].As<Napi::TypedArray>().ElementLength();
    auto action = replay_array<Napi::Uint8Array>(info[1], napi_uint8_array, "action", "Uint8Array", n);
    auto slot = replay_array<Napi::Uint32Array>(info[2], napi_uint32_array, "slot", "Uint32Array", n);
    auto bytes = replay_array<Napi::Float64Array>(info[3], napi_float64_array, "bytes", "Float64Array", n);
    auto stream = replay_array<Napi::Float64Array>(info[4], napi_float64_array, "stream", "Float64Array", n);
    const std::size_t slots = to_u64(info[5]);
    if (slots > n)
      throw invalid_argument(invalid_argument::kind::range, "slots",
                             "Expected slots <= " + std::to_string(n) + " (the number of operations) but received " + std::to_string(slots));
    bench::replay_options options;
    options.repeats = static_cast<int>(std::min<std::uint64_t>(to_u64(info[6]), 1u << 20));
    options.stop_at_first_oom = info[7].IsBoolean() && info[7].As<Napi::Boolean>().Value();
    std::vector<bench::replay_op> ops(n);
    for (std::size_t i = 0; i < n; ++i) {
      ops[i] = {static_cast<bench::replay_action>(action[i]), slot[i], static_cast<std::uint64_t>(bytes[i]),
                reinterpret_cast<stream_handle>(static_cast<std::uintptr_t>(stream[i]))};
    }
    auto result = bench::replay(r, ops, slots, options);
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
      o.Set("stopped", Napi::Boolean::New(env, p.stopped));
      o.Set("end", from_stats(env, p.end));
      passes[i] = o;
    }
    Napi::Object o = Napi::Object::New(env);
    o.Set("passes", passes);
    o.Set("clockOverheadNs", Napi::Number::New(env, result.clock_overhead_ns));
    return o;
  });
}

// The u32 values a test kernel reads or writes: (resource, ptr, count, ...) with count u32 at ptr
// checked to lie in one of the resource's blocks.
struct u32_block {
  ResourceObject& owner;
  void* ptr;
  std::uint64_t count;
};

u32_block u32_block_arg(const Napi::CallbackInfo& info) {
  ResourceObject& owner = ResourceObject::from(info[0], "allocator");
  void* ptr = to_pointer(info[1]);
  std::uint64_t count = to_u64(info[2]);
  owner.check_range(ptr, 0, count * 4);
  return {owner, ptr, count};
}

// The test kernels run on a GPU: a resource of host memory has nothing they can reach.
void require_device_memory(ResourceObject& owner, const char* fn) {
  if (owner.top().kind() == memory_kind::host)
    throw invalid_state(std::string(fn) + " runs on a GPU; this allocator holds host memory");
}

// fillU32(resource, ptr, count, value, stream)
Napi::Value FillU32(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    const u32_block b = u32_block_arg(info);
    require_device_memory(b.owner, "fillU32");
#ifdef GPUMEM_WITH_CUDA
    kernels::fill_u32(b.ptr, b.count, static_cast<std::uint32_t>(to_u64(info[3])), to_stream(info[4]));
#endif
  });
}

// peerFillU32(resource, ptr, count, value, device): fills count u32 values at ptr from a kernel on
// `device` (a CUDA ordinal, normally not the memory's own), and waits for it.
Napi::Value PeerFillU32(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    const u32_block b = u32_block_arg(info);
    require_device_memory(b.owner, "peerFillU32");
#ifdef GPUMEM_WITH_CUDA
    kernels::fill_u32_on_device(static_cast<int>(to_u64(info[4])), b.ptr, b.count,
                                static_cast<std::uint32_t>(to_u64(info[3])));
#endif
  });
}

// sumU32(resource, ptr, count, outPtr, stream, spinNs): adds the sum of count u32 values at ptr
// into the u64 at outPtr, after spinning spinNs nanoseconds on the GPU.
Napi::Value SumU32(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    const u32_block b = u32_block_arg(info);
    void* out = to_pointer(info[3]);
    b.owner.check_range(out, 0, 8);
    require_device_memory(b.owner, "sumU32");
#ifdef GPUMEM_WITH_CUDA
    std::uint64_t spin_ns = info[5].IsUndefined() ? 0 : to_u64(info[5]);
    kernels::spin_then_sum_u32(b.ptr, b.count, spin_ns, out, to_stream(info[4]));
#endif
  });
}

// deferHostWrite(stream, ptr, data): queues, on the host stream `stream`, a copy of `data` to ptr
// that runs only when the stream is reached (synchronizeHostStream, an event behind it being
// waited on, synchronizeHostStreams): a host stream kept busy, for the conformance suite's stream
// order check. ptr must stay writable until then; the suite gives a block of the allocator under test.
Napi::Value DeferHostWrite(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    stream_handle stream = to_stream(info[0]);
    auto* ptr = static_cast<std::uint8_t*>(to_pointer(info[1]));
    const auto data = typed_array_arg<Napi::Uint8Array>(info[2], napi_uint8_array, "data", "Uint8Array");
    std::vector<std::uint8_t> bytes(data.Data(), data.Data() + data.ByteLength());
    defer_host_work(stream, [ptr, bytes = std::move(bytes)] { std::copy(bytes.begin(), bytes.end(), ptr); });
  });
}

// synchronizeHostStream(stream): runs the work queued on a host stream.
Napi::Value SynchronizeHostStream(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] { synchronize_host_stream(to_stream(info[0])); });
}

// synchronizeHostStreams(): runs the work queued on every host stream.
Napi::Value SynchronizeHostStreams(const Napi::CallbackInfo& info) {
  synchronize_host_streams();
  return info.Env().Undefined();
}

// delayedAddU32(ptr, count, outPtr, stream, spinNs): sumU32 on raw device pointers (any
// allocator's, TypeScript strategies included): spins spinNs on the GPU, then adds the sum of count
// u32 at ptr into the u64 at outPtr. The caller vouches that both are live device-accessible memory.
Napi::Value DelayedAddU32(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    void* ptr = to_pointer(info[0]);
    std::uint64_t count = to_u64(info[1]);
    void* out = to_pointer(info[2]);
#ifdef GPUMEM_WITH_CUDA
    kernels::spin_then_sum_u32(ptr, count, to_u64(info[4]), out, to_stream(info[3]));
#else
    (void)ptr, (void)count, (void)out;
    throw invalid_state("delayedAddU32 runs on a GPU; gpumem was built without CUDA");
#endif
  });
}

// linkBench({ device, bytes, repetitions, blocksPerSm: number[], threadsPerBlock }): the host-link
// benchmark (gpumem/link_bench.hpp) on one GPU. Options are checked by the TypeScript wrapper and
// again by the core.
Napi::Value LinkBench(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&]() -> Napi::Value {
    Napi::Env env = info.Env();
    if (!info[0].IsObject()) {
      throw invalid_argument(invalid_argument::kind::type, "options", "Expected an options object for options but received " + describe(info[0]));
    }
    const Napi::Object js = info[0].As<Napi::Object>();
    bench::link_options o;
    o.device = static_cast<int>(get_u64(js, "device", 0));
    o.bytes = get_u64(js, "bytes", o.bytes);
    o.repetitions = static_cast<int>(std::min<std::uint64_t>(get_u64(js, "repetitions", o.repetitions), 1u << 20));
    o.threads_per_block = static_cast<int>(std::min<std::uint64_t>(get_u64(js, "threadsPerBlock", o.threads_per_block), 1u << 20));
    const Napi::Value grids = js.Get("blocksPerSm");
    if (grids.IsArray()) {
      const Napi::Array a = grids.As<Napi::Array>();
      o.blocks_per_sm.clear();
      for (std::uint32_t i = 0; i < a.Length(); ++i) {
        o.blocks_per_sm.push_back(static_cast<int>(std::min<std::uint64_t>(to_u64(a.Get(i)), 1u << 20)));
      }
    }
#ifdef GPUMEM_WITH_CUDA
    const bench::link_result r = bench::link_bandwidth(o);
#else
    throw invalid_state("linkBench needs a CUDA device: gpumem was built without CUDA (no CUDA toolkit at build time)");
    const bench::link_result r{};
#endif
    Napi::Array measurements = Napi::Array::New(env, r.measurements.size());
    for (std::size_t i = 0; i < r.measurements.size(); ++i) {
      const bench::link_measurement& m = r.measurements[i];
      Napi::Object row = Napi::Object::New(env);
      row.Set("kind", Napi::String::New(env, m.kind));
      row.Set("blocksPerSm", Napi::Number::New(env, m.blocks_per_sm));
      row.Set("grid", Napi::Number::New(env, m.grid));
      row.Set("bytes", Napi::Number::New(env, static_cast<double>(m.bytes)));
      Napi::Array gbps = Napi::Array::New(env, m.gbps.size());
      for (std::size_t k = 0; k < m.gbps.size(); ++k) gbps[k] = Napi::Number::New(env, m.gbps[k]);
      row.Set("gbps", gbps);
      measurements[i] = row;
    }
    Napi::Array skipped = Napi::Array::New(env, r.skipped.size());
    for (std::size_t i = 0; i < r.skipped.size(); ++i) skipped[i] = Napi::String::New(env, r.skipped[i]);
    Napi::Object out = Napi::Object::New(env);
    out.Set("device", Napi::Number::New(env, r.device));
    out.Set("deviceName", Napi::String::New(env, r.device_name));
    out.Set("multiprocessors", Napi::Number::New(env, r.multiprocessors));
    out.Set("threadsPerBlock", Napi::Number::New(env, r.threads_per_block));
    out.Set("repetitions", Napi::Number::New(env, r.repetitions));
    out.Set("requestedBytes", Napi::Number::New(env, static_cast<double>(r.requested_bytes)));
    out.Set("bytes", Napi::Number::New(env, static_cast<double>(r.bytes)));
    out.Set("hostAvailableBytes", Napi::Number::New(env, static_cast<double>(r.host_available_bytes)));
    out.Set("deviceFreeBytes", Napi::Number::New(env, static_cast<double>(r.device_free_bytes)));
    out.Set("measurements", measurements);
    out.Set("skipped", skipped);
    return out;
  });
}

}  // namespace

void register_tools(Napi::Env env, Napi::Object exports) {
  Napi::Object o = Napi::Object::New(env);
  set_functions(env, o,
                {{"benchPairs", BenchPairs},
                 {"benchTrace", BenchTrace},
                 {"replay", Replay},
                 {"fillU32", FillU32},
                 {"sumU32", SumU32},
                 {"peerFillU32", PeerFillU32},
                 {"linkBench", LinkBench},
                 {"deferHostWrite", DeferHostWrite},
                 {"synchronizeHostStream", SynchronizeHostStream},
                 {"synchronizeHostStreams", SynchronizeHostStreams},
                 {"delayedAddU32", DelayedAddU32}});
  exports.Set("tools", o);
}

}  // namespace gpumem::binding
