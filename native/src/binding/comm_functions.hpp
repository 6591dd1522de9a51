// The communicators of multi-process runs (src/comm): ncclLibrary(), ncclUniqueId(), the classes
// NcclComm and HostComm, and the parent's hostCommRegionCreate / Abort / Unlink.
#pragma once
#include <napi.h>

namespace gpumem::binding {

void register_comm(Napi::Env env, Napi::Object exports);

}  // namespace gpumem::binding
