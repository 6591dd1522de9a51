// The addon's entry point: it only registers what the binding layer defines.
#include <napi.h>

#include "comm_functions.hpp"
#include "device_functions.hpp"
#include "ops_functions.hpp"
#include "resource_object.hpp"
#include "tools_functions.hpp"

namespace {

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  gpumem::binding::register_device_functions(env, exports);
  exports.Set("Resource", gpumem::binding::ResourceObject::Define(env));
  exports.Set("strategies", Napi::Function::New(env, gpumem::binding::Strategies, "strategies"));
  exports.Set("checkSpec", Napi::Function::New(env, gpumem::binding::CheckSpec, "checkSpec"));
  exports.Set("strategyFlags", Napi::Function::New(env, gpumem::binding::StrategyFlags, "strategyFlags"));
  gpumem::binding::register_ops(env, exports);
  gpumem::binding::register_tools(env, exports);
  gpumem::binding::register_comm(env, exports);
  return exports;
}

}  // namespace

NODE_API_MODULE(gpumem, Init)
