#include "convert.hpp"

#include <algorithm>
#include <new>

#include "gpumem/errors.hpp"

namespace gpumem::binding {

std::uint64_t to_u64(const Napi::Value& v) {
  if (v.IsBigInt()) {
    bool lossless = false;
    return v.As<Napi::BigInt>().Uint64Value(&lossless);
  }
  return static_cast<std::uint64_t>(v.As<Napi::Number>().DoubleValue());
}

void* to_pointer(const Napi::Value& v) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(to_u64(v))); }

stream_handle to_stream(const Napi::Value& v) {
  if (v.IsUndefined() || v.IsNull()) return nullptr;
  return to_pointer(v);
}

Napi::Value from_pointer(Napi::Env env, const void* p) {
  return Napi::Number::New(env, static_cast<double>(reinterpret_cast<std::uintptr_t>(p)));
}

Napi::Object from_stats(Napi::Env env, const resource_stats& s) {
  Napi::Object o = Napi::Object::New(env);
  auto num = [&](const char* k, std::uint64_t v) { o.Set(k, Napi::Number::New(env, static_cast<double>(v))); };
  num("allocatedBytes", s.allocated_bytes);
  num("peakAllocatedBytes", s.peak_allocated_bytes);
  num("reservedBytes", s.reserved_bytes);
  num("peakReservedBytes", s.peak_reserved_bytes);
  num("allocCount", s.alloc_count);
  num("freeCount", s.free_count);
  num("upstreamAllocCount", s.upstream_alloc_count);
  num("upstreamFreeCount", s.upstream_free_count);
  num("oomCount", s.oom_count);
  num("segmentCount", s.segment_count);
  if (s.largest_free_block >= 0) num("largestFreeBlock", static_cast<std::uint64_t>(s.largest_free_block));
  if (s.host_allocated_bytes >= 0) {
    num("hostAllocatedBytes", static_cast<std::uint64_t>(s.host_allocated_bytes));
    num("peakHostAllocatedBytes", static_cast<std::uint64_t>(std::max<std::int64_t>(s.peak_host_allocated_bytes, 0)));
    num("hostReservedBytes", static_cast<std::uint64_t>(std::max<std::int64_t>(s.host_reserved_bytes, 0)));
    num("peakHostReservedBytes", static_cast<std::uint64_t>(std::max<std::int64_t>(s.peak_host_reserved_bytes, 0)));
    num("bytesMovedToHost", s.bytes_moved_to_host);
    num("bytesMovedToDevice", s.bytes_moved_to_device);
  }
  return o;
}

std::string describe(const Napi::Value& v) {
  if (v.IsString()) {
    // clipped as describeValue clips it: 80 UTF-16 code units, then the length in them
    const std::u16string text = v.As<Napi::String>().Utf16Value();
    constexpr std::size_t shown_chars = 80;
    if (text.size() <= shown_chars) return "'" + v.As<Napi::String>().Utf8Value() + "' of type string";
    const std::string head = Napi::String::New(v.Env(), text.substr(0, shown_chars)).Utf8Value();
    return "'" + head + "\u2026' (" + std::to_string(text.size()) + " characters) of type string";
  }
  if (v.IsNull()) return "null";
  if (v.IsSymbol()) return "a symbol";
  if (v.IsUndefined()) return "undefined of type undefined";
  if (v.IsArray()) return "an array";
  if (v.IsFunction()) return "a function";
  if (v.IsObject()) {
    Napi::Env env = v.Env();
    Napi::Object proto = env.Global().Get("Object").As<Napi::Object>().Get("prototype").As<Napi::Object>();
    Napi::Function to_string = proto.Get("toString").As<Napi::Function>();
    return "an object (" + to_string.Call(v, {}).As<Napi::String>().Utf8Value() + ")";
  }
  Napi::Value text = v.ToString();
  std::string type = v.IsNumber() ? "number" : v.IsBoolean() ? "boolean" : v.IsBigInt() ? "bigint" : "symbol";
  return text.As<Napi::String>().Utf8Value() + (v.IsBigInt() ? "n" : "") + " of type " + type;
}

std::uint64_t get_u64(const Napi::Object& o, const char* key, std::uint64_t fallback) {
  Napi::Value v = o.Get(key);
  return v.IsUndefined() || v.IsNull() ? fallback : to_u64(v);
}

bool get_bool(const Napi::Object& o, const char* key, bool fallback) {
  Napi::Value v = o.Get(key);
  return v.IsUndefined() || v.IsNull() ? fallback : v.ToBoolean().Value();
}

std::string get_string(const Napi::Object& o, const char* key, const std::string& fallback) {
  Napi::Value v = o.Get(key);
  return v.IsUndefined() || v.IsNull() ? fallback : v.ToString().Utf8Value();
}

namespace {

// One tag name: a TypeError for a non-string; the core's own checks (intern_tag: empty, too long,
// control characters) with the argument named, as the TypeScript checkTag names it.
tag_id to_tag(const Napi::Value& e, const std::string& name) {
  if (!e.IsString()) {
    throw invalid_argument(invalid_argument::kind::type, name, "Expected a tag name (string) for " + name + " but received " + describe(e));
  }
  try {
    return intern_tag(e.As<Napi::String>().Utf8Value());
  } catch (const invalid_argument& err) {
    std::string message = err.what();
    const std::size_t at = message.find(" but received");
    if (at != std::string::npos) message.insert(at, " for " + name);
    throw invalid_argument(err.error_kind(), name, message);
  }
}

}  // namespace

std::vector<tag_id> to_tags(const Napi::Value& v, const std::string& name) {
  std::vector<tag_id> out;
  if (v.IsUndefined()) return out;
  if (!v.IsArray()) {
    throw invalid_argument(invalid_argument::kind::type, name, "Expected an array of tag names for " + name + " but received " + describe(v));
  }
  Napi::Array a = v.As<Napi::Array>();
  for (std::uint32_t i = 0; i < a.Length(); ++i) out.push_back(to_tag(a.Get(i), name + "[" + std::to_string(i) + "]"));
  return out;
}

sleep_request to_sleep_request(const Napi::Value& v, bool* names_no_tag) {
  sleep_request request;
  *names_no_tag = false;
  if (v.IsUndefined()) return request;
  if (!v.IsObject() || v.IsArray() || v.IsFunction()) {
    throw invalid_argument(invalid_argument::kind::type, "request",
                           "Expected an object { tags?, keep? } for request but received " + describe(v));
  }
  const Napi::Object o = v.As<Napi::Object>();
  Napi::Array keys = o.GetPropertyNames();
  for (std::uint32_t i = 0; i < keys.Length(); ++i) {
    const std::string key = keys.Get(i).ToString().Utf8Value();
    if (key != "tags" && key != "keep") {
      throw invalid_argument(invalid_argument::kind::type, key, "Unknown option '" + key + "' in request; expected one of: tags, keep");
    }
  }
  const Napi::Value tags = o.Get("tags");
  request.tags = to_tags(tags, "request.tags");
  *names_no_tag = tags.IsArray() && request.tags.empty();
  const Napi::Value keep = o.Get("keep");
  if (keep.IsBoolean()) {
    request.keep_all = keep.As<Napi::Boolean>().Value();
  } else if (!keep.IsUndefined()) {
    if (!keep.IsArray()) {
      throw invalid_argument(invalid_argument::kind::type, "request.keep",
                             "Expected a boolean or an array of tag names for request.keep but received " + describe(keep));
    }
    request.keep_all = false;
    request.keep = to_tags(keep, "request.keep");
  }
  return request;
}

namespace {
Napi::Array tag_names(Napi::Env env, const std::vector<tag_id>& tags) {
  Napi::Array out = Napi::Array::New(env, tags.size());
  for (std::size_t i = 0; i < tags.size(); ++i) out.Set(static_cast<std::uint32_t>(i), tag_name(tags[i]));
  return out;
}
}  // namespace

Napi::Object from_sleep_report(Napi::Env env, const sleep_report& r) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("changed", tag_names(env, r.changed));
  o.Set("unchanged", tag_names(env, r.unchanged));
  o.Set("deviceBytes", Napi::Number::New(env, static_cast<double>(r.device_bytes)));
  o.Set("copiedBytes", Napi::Number::New(env, static_cast<double>(r.copied_bytes)));
  o.Set("seconds", Napi::Number::New(env, r.seconds));
  return o;
}

Napi::Array from_tag_states(Napi::Env env, const std::vector<tag_state>& states) {
  Napi::Array out = Napi::Array::New(env, states.size());
  for (std::size_t i = 0; i < states.size(); ++i) {
    const tag_state& t = states[i];
    Napi::Object o = Napi::Object::New(env);
    auto num = [&](const char* k, std::uint64_t v) { o.Set(k, Napi::Number::New(env, static_cast<double>(v))); };
    o.Set("tag", tag_name(t.tag));
    o.Set("asleep", t.asleep);
    o.Set("mode", sleep_mode_name(t.mode));
    num("allocatedBytes", t.allocated_bytes);
    num("deviceBytes", t.device_bytes);
    num("sleptBytes", t.slept_bytes);
    num("backupBytes", t.backup_bytes);
    out.Set(static_cast<std::uint32_t>(i), o);
  }
  return out;
}

namespace {
Napi::Error with_code(Napi::Error error, const char* code) {
  error.Set("code", Napi::String::New(error.Env(), code));
  return error;
}
}  // namespace

void throw_js(Napi::Env env) {
  try {
    throw;
  } catch (const out_of_memory& e) {
    Napi::Error error = with_code(Napi::Error::New(env, e.what()), "GPUMEM_OOM");
    error.Set("reason", Napi::String::New(env, e.reason()));  // the message without the figures
    error.Set("requestedBytes", Napi::Number::New(env, static_cast<double>(e.requested_bytes())));
    try {
      error.Set("stats", from_stats(env, e.stats()));
    } catch (...) {
      // No room left for the figures (std::bad_alloc, or the engine failed the object): the error
      // goes without them, still an out-of-memory error, rather than ending the process.
    }
    throw error;
  } catch (const invalid_argument& e) {
    auto tag = [&](Napi::Error error) {
      with_code(error, "GPUMEM_INVALID_ARGUMENT");
      error.Set("argument", Napi::String::New(env, e.argument()));
      return error;
    };
    if (e.error_kind() == invalid_argument::kind::range) throw tag(Napi::RangeError::New(env, e.what()));
    throw tag(Napi::TypeError::New(env, e.what()));
  } catch (const cuda_error& e) {
    Napi::Error error = with_code(Napi::Error::New(env, e.what()), "GPUMEM_CUDA");
    error.Set("cudaError", Napi::Number::New(env, e.code()));
    error.Set("cudaErrorName", Napi::String::New(env, e.name()));
    throw error;
  } catch (const invalid_state& e) {
    throw with_code(Napi::Error::New(env, e.what()), "GPUMEM_INVALID_STATE");
  } catch (const std::bad_alloc&) {
    throw with_code(Napi::Error::New(env, "out of host memory"), "GPUMEM_HOST_OOM");
  } catch (const std::exception& e) {
    throw Napi::Error::New(env, e.what());
  } catch (...) {
    throw Napi::Error::New(env, "unknown native error");
  }
}

}  // namespace gpumem::binding
