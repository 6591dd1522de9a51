// Module-level functions: devices, streams, events, library probes.
#pragma once
#include <napi.h>

namespace gpumem::binding {

void register_device_functions(Napi::Env env, Napi::Object exports);

}  // namespace gpumem::binding
