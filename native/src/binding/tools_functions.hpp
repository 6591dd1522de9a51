// exports.tools: the native benchmark loops, trace replay and test kernels (src/tools), each taking
// a Resource as its first argument. Kept apart from the Resource class so that production
// allocators carry no test or benchmark tooling.
#pragma once
#include <napi.h>

namespace gpumem::binding {
void register_tools(Napi::Env env, Napi::Object exports);
}
