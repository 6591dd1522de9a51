// A JavaScript handle on a chain of memory resources. The constructor takes the flat spec
//   { strategy: 'pool', device: 0, options: { upstream: 'cuda', maxReservedBytes }, limitBytes,
//     faultInjection: { failEvery, failAfterBytes }, trackingCapacity }
// converts it into a gpumem::chain_spec and has the core's chain builder (chain_builder.hpp) build
// it: the layer order is decided there, not here. { type: 'shared', token } attaches to a chain
// another thread shared.
#pragma once
#include <napi.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "gpumem/chain_builder.hpp"
#include "gpumem/memory_resource.hpp"
#include "gpumem/sleep.hpp"
#include "gpumem/tracking_adaptor.hpp"

namespace gpumem::binding {

// strategies(): the core's strategy descriptors (gpumem/strategy_registry.hpp) as plain objects,
// [{ name, description, layer, wraps?, flags: { requiresCuda, capturable, ... }, options: [{ key,
// kind, minimum?, choices?, default?, required, help }] }], in the registry's order.
Napi::Value Strategies(const Napi::CallbackInfo& info);
// checkSpec(spec): the spec decoded and validated as the chain builder does (gpumem/chain_builder.hpp
// validate()), nothing built: the one check of a native strategy's options.
Napi::Value CheckSpec(const Napi::CallbackInfo& info);
// The registry's flags that JavaScript has, with their documentation: [{ key, doc }].
Napi::Value StrategyFlags(const Napi::CallbackInfo& info);

// A chain of layers owned jointly by the ResourceObjects of several threads (worker_threads): it
// lives until the last of them lets go, and is then destroyed top first.
struct shared_chain {
  explicit shared_chain(resource_chain c) : chain(std::move(c)) {}
  resource_chain chain;
};

class ResourceObject : public Napi::ObjectWrap<ResourceObject> {
 public:
  static Napi::Function Define(Napi::Env env);
  explicit ResourceObject(const Napi::CallbackInfo& info);
  ~ResourceObject() override;

  // The ResourceObject that `v` is; throws invalid_argument (type) naming `name` for anything else.
  static ResourceObject& from(const Napi::Value& v, const char* name);

  memory_resource& top();  // throws invalid_state after dispose

  // Throws unless [ptr + offset, + bytes) lies inside one live allocation of the chain.
  void check_range(void* ptr, std::uint64_t offset, std::uint64_t bytes);

 private:
  Napi::Value Prefetch(const Napi::CallbackInfo& info);
  Napi::Value RecordStream(const Napi::CallbackInfo& info);
  Napi::Value Stats(const Napi::CallbackInfo& info);
  Napi::Value ResetPeak(const Napi::CallbackInfo& info);
  Napi::Value Trim(const Napi::CallbackInfo& info);
  Napi::Value Write(const Napi::CallbackInfo& info);
  Napi::Value Read(const Napi::CallbackInfo& info);
  Napi::Value Copy(const Napi::CallbackInfo& info, bool to_allocation);
  Napi::Value Dispose(const Napi::CallbackInfo& info);
  Napi::Value TrackingEvents(const Napi::CallbackInfo& info);
  Napi::Value SetTrackingTag(const Napi::CallbackInfo& info);
  Napi::Value SetTrackingEnabled(const Napi::CallbackInfo& info);
  Napi::Value SetPlacement(const Napi::CallbackInfo& info);  // the tiered strategy's placement
  Napi::Value FastPath(const Napi::CallbackInfo& info);

  // Sleep and wake by tag (gpumem/sleep.hpp), for a chain whose leaf is sleepable
  // (resource_chain::sleeper; the strategies with the registry's sleep flag):
  //   sleepable() -> boolean; sleep(request?) -> report; wake(tags?) -> report; tagStats() -> [...];
  //   trimBackup(); reserveBackup(bytes). The others throw invalid_state for a chain that cannot sleep.
  // Resource.setThreadTag(name?) (static): the tag of the allocations this thread makes from now on
  // (undefined: the process tag), what the TypeScript layer sends when withTag's tag changes.
  Napi::Value Sleepable(const Napi::CallbackInfo& info);
  Napi::Value Sleep(const Napi::CallbackInfo& info);
  Napi::Value ReserveBackup(const Napi::CallbackInfo& info);
  Napi::Value Wake(const Napi::CallbackInfo& info);
  Napi::Value TagStats(const Napi::CallbackInfo& info);
  Napi::Value TrimBackup(const Napi::CallbackInfo& info);
  static Napi::Value SetThreadTag(const Napi::CallbackInfo& info);
  sleepable* sleeper();       // nullptr where the chain cannot sleep; throws invalid_state after dispose
  sleepable& need_sleeper();  // throws invalid_state where the chain cannot sleep

  // The fast path: malloc/free with their arguments in a Float64Array shared with JavaScript
  // ([0] bytes, [1] stream, [2] pointer: in for free, out for malloc), so that a call costs one
  // napi_get_cb_info instead of a conversion per argument.
  static napi_value FastAllocate(napi_env env, napi_callback_info info);
  static napi_value FastDeallocate(napi_env env, napi_callback_info info);
  double* fast_args_ = nullptr;
  Napi::Reference<Napi::Float64Array> fast_args_ref_;

  void release_chain() noexcept;

  // Sharing with other threads. shareHandle() moves the chain into `shared_` and returns a token
  // (a number) that a ResourceObject in another thread attaches to with the spec
  // { type: 'shared', token }. Each holder lets go on dispose (or when collected); the token is
  // revoked when the object that issued it lets go.
  Napi::Value ShareHandle(const Napi::CallbackInfo& info);
  void attach_shared(std::uint64_t token);
  void release_shared() noexcept;
  std::shared_ptr<shared_chain> shared_;
  std::uint64_t share_token_ = 0;

  std::optional<resource_chain> chain_;  // this object's own chain, until shared or disposed
  tracking_adaptor* tracker_ = nullptr;
};

}  // namespace gpumem::binding
