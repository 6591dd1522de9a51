// The communicators of multi-process runs (src/comm): ncclLibrary(), ncclUniqueId(), the classes
// NcclComm and HostComm, the parent's hostCommRegionCreate / Abort / Unlink, and a rank's
// dieWithParent.
#pragma once
#include <napi.h>

namespace gpumem::binding {

void register_comm(Napi::Env env, Napi::Object exports);

}  // namespace gpumem::binding
