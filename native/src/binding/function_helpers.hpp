// What the addon's function tables (ops, tools, device, comm) share: a guarded call that returns
// undefined (the Resource class's methods use it too), a typed array argument checked for its type,
// and the registration of named functions on an object.
#pragma once
#include <napi.h>

#include <initializer_list>
#include <string>
#include <utility>

#include "convert.hpp"
#include "gpumem/errors.hpp"

namespace gpumem::binding {

// Runs f under guarded (convert.hpp) for a function whose JavaScript result is undefined.
template <class F>
Napi::Value guarded_undefined(Napi::Env env, F&& f) {
  return guarded(env, [&] {
    f();
    return env.Undefined();
  });
}

// v as a typed array of `type` (expected: its name in the message, e.g. "Float32Array"), or a
// TypeError naming the argument.
template <class Array>
Array typed_array_arg(const Napi::Value& v, napi_typedarray_type type, const char* name, const char* expected) {
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != type)
    throw invalid_argument(invalid_argument::kind::type, name,
                           std::string("Expected a ") + expected + " for " + name + " but received " + describe(v));
  return v.As<Array>();
}

using function_entry = std::pair<const char*, Napi::Value (*)(const Napi::CallbackInfo&)>;

// Sets each function on target under its name (the JavaScript function's name too).
inline void set_functions(Napi::Env env, Napi::Object target, std::initializer_list<function_entry> functions) {
  for (const function_entry& f : functions) target.Set(f.first, Napi::Function::New(env, f.second, f.first));
}

}  // namespace gpumem::binding
