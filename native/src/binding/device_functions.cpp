#include "device_functions.hpp"

#include "convert.hpp"
#include "function_helpers.hpp"
#include "gpumem/device.hpp"
#include "gpumem/peer_access.hpp"
#include "gpumem/topology.hpp"
#include "ops/ops.hpp"

namespace gpumem::binding {
namespace {

int device_arg(const Napi::CallbackInfo& info, std::size_t i) {
  return info[i].IsUndefined() ? 0 : static_cast<int>(info[i].As<Napi::Number>().Int32Value());
}

Napi::Value DeviceCount(const Napi::CallbackInfo& info) { return Napi::Number::New(info.Env(), device_count()); }

Napi::Value DeviceStatus(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] { return Napi::String::New(info.Env(), device_status()); });
}

Napi::Value DeviceProperties(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] {
    device_properties p = get_device_properties(device_arg(info, 0));
    Napi::Env env = info.Env();
    Napi::Object o = Napi::Object::New(env);
    o.Set("index", p.index);
    o.Set("name", p.name);
    o.Set("computeCapability", std::to_string(p.compute_major) + "." + std::to_string(p.compute_minor));
    o.Set("totalMemory", Napi::Number::New(env, static_cast<double>(p.total_memory)));
    o.Set("multiprocessors", p.multiprocessors);
    o.Set("managedMemory", p.managed_memory);
    o.Set("concurrentManagedAccess", p.concurrent_managed_access);
    o.Set("memoryPools", p.memory_pools);
    o.Set("pciBusId", p.pci_bus_id);
    o.Set("l2CacheBytes", Napi::Number::New(env, static_cast<double>(p.l2_cache_bytes)));
    return o;
  });
}

Napi::Value MemoryInfo(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] {
    memory_info m = get_memory_info(device_arg(info, 0));
    Napi::Object o = Napi::Object::New(info.Env());
    o.Set("freeBytes", Napi::Number::New(info.Env(), static_cast<double>(m.free_bytes)));
    o.Set("totalBytes", Napi::Number::New(info.Env(), static_cast<double>(m.total_bytes)));
    return o;
  });
}

// peerTopology(): { deviceCount, pciBusIds, nvmlStatus, pairs: [{ from, to, canAccessPeer,
// performanceRank, accessSupported, nativeAtomics, link, nvlinks, linkReason? }] }. Never throws.
Napi::Value PeerTopology(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const peer_topology t = get_peer_topology();
  Napi::Object o = Napi::Object::New(env);
  o.Set("deviceCount", t.device_count);
  Napi::Array ids = Napi::Array::New(env, t.pci_bus_ids.size());
  for (std::size_t i = 0; i < t.pci_bus_ids.size(); ++i) ids.Set(static_cast<std::uint32_t>(i), t.pci_bus_ids[i]);
  o.Set("pciBusIds", ids);
  o.Set("nvmlStatus", t.nvml_status);
  Napi::Array pairs = Napi::Array::New(env, t.pairs.size());
  for (std::size_t i = 0; i < t.pairs.size(); ++i) {
    const peer_pair& p = t.pairs[i];
    Napi::Object e = Napi::Object::New(env);
    e.Set("from", p.from);
    e.Set("to", p.to);
    e.Set("canAccessPeer", p.can_access_peer);
    e.Set("performanceRank", p.performance_rank);
    e.Set("accessSupported", p.access_supported);
    e.Set("nativeAtomics", p.native_atomics);
    e.Set("link", peer_link_name(p.link));
    e.Set("nvlinks", p.nvlinks);
    if (!p.link_reason.empty()) e.Set("linkReason", p.link_reason);
    pairs.Set(static_cast<std::uint32_t>(i), e);
  }
  o.Set("pairs", pairs);
  return o;
}

// canAccessPeer(accessor, owner): cudaDeviceCanAccessPeer; false for anything that is not a pair of devices.
Napi::Value CanAccessPeer(const Napi::CallbackInfo& info) {
  return Napi::Boolean::New(info.Env(), can_access_peer(device_arg(info, 0), device_arg(info, 1)));
}

Napi::Value CreateStream(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] { return from_pointer(info.Env(), create_stream(device_arg(info, 0))); });
}

Napi::Value DestroyStream(const Napi::CallbackInfo& info) {
  destroy_stream(to_stream(info[0]));
  return info.Env().Undefined();
}

Napi::Value SynchronizeStream(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] { synchronize_stream(to_stream(info[0])); });
}

Napi::Value SynchronizeDevice(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] { synchronize_device(device_arg(info, 0)); });
}

Napi::Value SetCurrentDevice(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] { set_current_device(device_arg(info, 0)); });
}

Napi::Value CreateEvent(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] { return from_pointer(info.Env(), create_event(device_arg(info, 0))); });
}

Napi::Value DestroyEvent(const Napi::CallbackInfo& info) {
  destroy_event(to_pointer(info[0]));
  return info.Env().Undefined();
}

Napi::Value RecordEvent(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] { record_event(to_pointer(info[0]), to_stream(info[1])); });
}

Napi::Value SynchronizeEvent(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] { synchronize_event(to_pointer(info[0])); });
}

Napi::Value QueryEvent(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] { return Napi::Boolean::New(info.Env(), query_event(to_pointer(info[0]))); });
}

Napi::Value ElapsedMs(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] {
    return Napi::Number::New(info.Env(), elapsed_ms(to_pointer(info[0]), to_pointer(info[1])));
  });
}

Napi::Value BeginCapture(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] { begin_capture(to_stream(info[0])); });
}

Napi::Value EndCapture(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] { return from_pointer(info.Env(), end_capture(to_stream(info[0]))); });
}

Napi::Value LaunchGraph(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] { launch_graph(to_pointer(info[0]), to_stream(info[1])); });
}

Napi::Value DestroyGraph(const Napi::CallbackInfo& info) {
  destroy_graph(to_pointer(info[0]));
  return info.Env().Undefined();
}

Napi::Value CanLoadLibrary(const Napi::CallbackInfo& info) {
  std::string error;
  bool ok = can_load_library(info[0].ToString().Utf8Value(), &error);
  Napi::Object o = Napi::Object::New(info.Env());
  o.Set("ok", ok);
  if (!ok) o.Set("error", error);
  return o;
}

// kernelImage(device): whether the device can run the kernels of this build, and which image it uses.
Napi::Value KernelImage(const Napi::CallbackInfo& info) {
  const ops::kernel_image_info k = ops::kernel_image(device_arg(info, 0));
  Napi::Object o = Napi::Object::New(info.Env());
  o.Set("runnable", k.runnable);
  o.Set("binaryVersion", k.binary_version);
  o.Set("ptxVersion", k.ptx_version);
  if (!k.runnable) o.Set("error", k.error);
  return o;
}

}  // namespace

void register_device_functions(Napi::Env env, Napi::Object exports) {
  exports.Set("builtWithCuda", Napi::Boolean::New(env, built_with_cuda()));
  exports.Set("driverVersion", Napi::Number::New(env, driver_version()));
  exports.Set("runtimeVersion", Napi::Number::New(env, ops::runtime_version()));
  exports.Set("cudaArchitectures", Napi::String::New(env, ops::built_cuda_architectures()));
  set_functions(env, exports,
                {{"kernelImage", KernelImage},
                 {"deviceCount", DeviceCount},
                 {"deviceStatus", DeviceStatus},
                 {"deviceProperties", DeviceProperties},
                 {"memoryInfo", MemoryInfo},
                 {"peerTopology", PeerTopology},
                 {"canAccessPeer", CanAccessPeer},
                 {"createStream", CreateStream},
                 {"destroyStream", DestroyStream},
                 {"synchronizeStream", SynchronizeStream},
                 {"synchronizeDevice", SynchronizeDevice},
                 {"setCurrentDevice", SetCurrentDevice},
                 {"createEvent", CreateEvent},
                 {"destroyEvent", DestroyEvent},
                 {"recordEvent", RecordEvent},
                 {"synchronizeEvent", SynchronizeEvent},
                 {"queryEvent", QueryEvent},
                 {"elapsedMs", ElapsedMs},
                 {"canLoadLibrary", CanLoadLibrary},
                 {"beginCapture", BeginCapture},
                 {"endCapture", EndCapture},
                 {"launchGraph", LaunchGraph},
                 {"destroyGraph", DestroyGraph}});
}

}  // namespace gpumem::binding
