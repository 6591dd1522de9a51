// Conversions between JavaScript values and the core's plain C++ types, and the one place where
// C++ exceptions become JavaScript errors. The core never includes napi.h.
#pragma once
#include <napi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gpumem/sleep.hpp"
#include "gpumem/stats.hpp"
#include "gpumem/stream.hpp"

namespace gpumem::binding {

// Numbers from JS are validated by the TypeScript layer; these only convert.
std::uint64_t to_u64(const Napi::Value& v);
void* to_pointer(const Napi::Value& v);
stream_handle to_stream(const Napi::Value& v);  // number (0 = default stream) or undefined
Napi::Value from_pointer(Napi::Env env, const void* p);
Napi::Object from_stats(Napi::Env env, const resource_stats& s);

// Sleep and wake by tag (gpumem/sleep.hpp). Tags travel as names; ids stay in C++.
//   request: undefined | { tags?: string[], keep?: boolean | string[] }, decoded once, here: the
//   TypeScript layer passes it as given, and anything else throws invalid_argument naming the field
//   (request.tags[1], ...), a TypeError or RangeError in JavaScript. *names_no_tag is set where the
//   request lists no tag (tags: []): nothing sleeps, where a request without tags sleeps every tag.
//   tags: undefined | string[] (wake).
sleep_request to_sleep_request(const Napi::Value& v, bool* names_no_tag);
std::vector<tag_id> to_tags(const Napi::Value& v, const std::string& name);
// { changed: string[], unchanged: string[], deviceBytes, copiedBytes, seconds }
Napi::Object from_sleep_report(Napi::Env env, const sleep_report& r);
// [{ tag, asleep, mode: 'keep' | 'discard', allocatedBytes, deviceBytes, sleptBytes, backupBytes }]
Napi::Array from_tag_states(Napi::Env env, const std::vector<tag_state>& states);

// A value as validate.ts's describeValue shows it in messages: "-1 of type number", "'x' of type
// string" (clipped to 80 characters, with its length), "null", "an array", "an object ([object Object])".
std::string describe(const Napi::Value& v);

// Optional object properties with defaults.
std::uint64_t get_u64(const Napi::Object& o, const char* key, std::uint64_t fallback);
bool get_bool(const Napi::Object& o, const char* key, bool fallback);
std::string get_string(const Napi::Object& o, const char* key, const std::string& fallback);

// Runs f and turns any exception it throws into a JavaScript error carrying a `code`:
// GPUMEM_OOM (with requestedBytes and stats), GPUMEM_INVALID_ARGUMENT (a RangeError or TypeError,
// with argument), GPUMEM_CUDA (with cudaError and cudaErrorName), GPUMEM_INVALID_STATE.
template <class F>
auto guarded(Napi::Env env, F&& f) -> decltype(f());
[[noreturn]] void throw_js(Napi::Env env);  // call inside a catch block

template <class F>
auto guarded(Napi::Env env, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Napi::Error&) {
    throw;
  } catch (...) {
    throw_js(env);
  }
}

}  // namespace gpumem::binding
