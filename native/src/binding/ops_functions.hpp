// exports.ops: the trainer's native operations (packages/gnn/src/framework/native-ops.ts is the contract).
#pragma once
#include <napi.h>

namespace gpumem::binding {

void register_ops(Napi::Env env, Napi::Object exports);

}  // namespace gpumem::binding
