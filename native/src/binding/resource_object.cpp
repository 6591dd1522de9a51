#include "resource_object.hpp"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include "convert.hpp"
#include "function_helpers.hpp"
#include "gpumem/device.hpp"
#include "gpumem/errors.hpp"
#include "gpumem/strategy_registry.hpp"
#include "gpumem/placeable.hpp"

namespace gpumem::binding {
namespace {

// Spec fields, checked here and nowhere else: the TypeScript strategies pass a native strategy's
// options through as given (their generated options carry types and defaults, no checks), so these
// are the messages a caller sees, in the wording of the TypeScript checks (validate.ts) that other
// options get: "Expected non-negative integer for releaseThreshold but received -1 of type number",
// a RangeError for a number out of range, a TypeError for anything else.
[[noreturn]] void bad_field(const std::string& name, const std::string& expected, const Napi::Value& v) {
  const bool is_number = v.IsNumber();
  throw invalid_argument(is_number ? invalid_argument::kind::range : invalid_argument::kind::type, name,
                         "Expected " + expected + " for " + name + " but received " + describe(v));
}

// A TypeError whatever the value (a boolean, a string: no number is ever in their range).
[[noreturn]] void bad_type(const std::string& name, const std::string& expected, const Napi::Value& v) {
  throw invalid_argument(invalid_argument::kind::type, name, "Expected " + expected + " for " + name + " but received " + describe(v));
}

std::optional<std::uint64_t> field_u64(const Napi::Object& o, const char* key, const std::string& name, bool positive) {
  Napi::Value v = o.Get(key);
  if (v.IsUndefined()) return std::nullopt;
  const char* expected = positive ? "positive integer" : "non-negative integer";
  if (!v.IsNumber()) bad_field(name, expected, v);
  const double d = v.As<Napi::Number>().DoubleValue();
  if (!(d >= (positive ? 1.0 : 0.0)) || d > 9007199254740991.0 || std::floor(d) != d) bad_field(name, expected, v);
  return static_cast<std::uint64_t>(d);
}

std::optional<double> field_number(const Napi::Object& o, const char* key, const std::string& name) {
  Napi::Value v = o.Get(key);
  if (v.IsUndefined()) return std::nullopt;
  if (!v.IsNumber() || !std::isfinite(v.As<Napi::Number>().DoubleValue())) bad_field(name, "finite number", v);
  return v.As<Napi::Number>().DoubleValue();
}

std::optional<bool> field_bool(const Napi::Object& o, const char* key, const std::string& name) {
  Napi::Value v = o.Get(key);
  if (v.IsUndefined()) return std::nullopt;
  if (!v.IsBoolean()) bad_type(name, "boolean", v);
  return v.As<Napi::Boolean>().Value();
}

std::optional<std::string> field_string(const Napi::Object& o, const char* key, const std::string& name) {
  Napi::Value v = o.Get(key);
  if (v.IsUndefined()) return std::nullopt;
  if (!v.IsString()) bad_type(name, "string", v);
  return v.As<Napi::String>().Utf8Value();
}

std::optional<Napi::Object> field_object(const Napi::Object& o, const char* key, const std::string& name) {
  Napi::Value v = o.Get(key);
  if (v.IsUndefined()) return std::nullopt;
  if (!v.IsObject() || v.IsArray() || v.IsFunction()) bad_type(name, "an object", v);
  return v.As<Napi::Object>();
}

// peerAccess: an array of CUDA device ordinals (non-negative integers); the chain builder checks the
// rest (distinct, not the memory's own device, below the device count, with a P2P path).
std::vector<int> field_devices(const Napi::Object& o, const char* key, const std::string& name) {
  Napi::Value v = o.Get(key);
  if (v.IsUndefined()) return {};
  if (!v.IsArray()) {
    throw invalid_argument(invalid_argument::kind::type, name,
                           "Expected an array of CUDA device ordinals for " + name + " but received " + describe(v));
  }
  Napi::Array a = v.As<Napi::Array>();
  std::vector<int> out;
  for (std::uint32_t i = 0; i < a.Length(); ++i) {
    const std::string at = name + "[" + std::to_string(i) + "]";
    Napi::Value e = a.Get(i);
    if (!e.IsNumber()) bad_field(at, "non-negative integer", e);
    const double d = e.As<Napi::Number>().DoubleValue();
    if (!(d >= 0) || d > 2147483647.0 || std::floor(d) != d) bad_field(at, "non-negative integer", e);
    out.push_back(static_cast<int>(d));
  }
  return out;
}

// Rejects keys a part of the spec does not know, so that a typo does not pass silently.
void known_keys(const Napi::Object& o, std::initializer_list<const char*> keys, const std::string& where) {
  Napi::Array names = o.GetPropertyNames();
  for (std::uint32_t i = 0; i < names.Length(); ++i) {
    const std::string key = names.Get(i).ToString().Utf8Value();
    bool known = false;
    std::string list;
    for (const char* k : keys) {
      known = known || key == k;
      list += std::string(list.empty() ? "" : ", ") + k;
    }
    if (!known) {
      throw invalid_argument(invalid_argument::kind::type, key,
                             "Unknown option '" + key + "' in " + where + "; expected one of: " + list);
    }
  }
}

// A strategy option from JavaScript, by the kind its descriptor gives it (gpumem/strategy_registry.hpp).
option_value field_option(const Napi::Object& o, const option_descriptor& option) {
  const char* key = option.key.c_str();
  switch (option.kind) {
    case option_kind::bytes:
    case option_kind::count: {
      if (auto v = field_u64(o, key, option.key, option.minimum >= 1)) return *v;
      return std::monostate{};
    }
    case option_kind::boolean: {
      if (auto v = field_bool(o, key, option.key)) return *v;
      return std::monostate{};
    }
    case option_kind::number: {
      if (auto v = field_number(o, key, option.key)) return *v;
      return std::monostate{};
    }
    case option_kind::text: {
      if (auto v = field_string(o, key, option.key)) return *v;
      return std::monostate{};
    }
    case option_kind::choice: {
      const Napi::Value given = o.Get(key);
      if (given.IsUndefined()) return std::monostate{};
      // A placement option also takes 'auto' (the TypeScript strategies resolve it before they call):
      // the choice on the device where a CUDA device is present, else 'host'.
      std::string list;
      for (const std::string& c : option.choices) list += (list.empty() ? "'" : ", '") + c + "'";
      const bool takes_auto = option.placement && std::find(option.choices.begin(), option.choices.end(), "auto") == option.choices.end();
      if (takes_auto) list += ", 'auto'";
      if (given.IsString()) {
        const std::string v = given.As<Napi::String>().Utf8Value();
        for (const std::string& c : option.choices) {
          if (v == c) return c;
        }
        if (takes_auto && v == "auto") {
          const bool on_device = device_count() > 0;
          for (const std::string& c : option.choices) {
            if (on_device && c != "host") return c;
          }
          return std::string("host");
        }
      }
      // a TypeError whatever the value, as checkOneOf's
      throw invalid_argument(invalid_argument::kind::type, option.key,
                             "Expected one of " + list + " for " + option.key + " but received " + describe(given));
    }
  }
  return std::monostate{};
}

// The JavaScript spec as the core's chain_spec; the builder validates what is left (chain_builder.hpp).
// A strategy's options are read by walking its descriptor: no key list of its own here.
chain_spec to_chain_spec(const Napi::Object& js) {
  known_keys(js, {"strategy", "device", "peerAccess", "options", "limitBytes", "faultInjection", "trackingCapacity", "addressOnly"},
             "the spec");
  chain_spec spec;
  const std::optional<std::string> strategy = field_string(js, "strategy", "strategy");
  if (!strategy) {
    std::string list;
    for (const strategy_descriptor* d : strategies()) list += (list.empty() ? "'" : ", '") + d->name + "'";
    bad_field("strategy", "one of " + list, js.Get("strategy"));
  }
  const strategy_descriptor& descriptor = parse_strategy(*strategy);
  spec.strategy = descriptor.name;
  // A strategy with the host_device flag takes device -1 for host memory; every other a CUDA ordinal.
  if (descriptor.flags.host_device && js.Get("device").IsNumber() &&
      js.Get("device").As<Napi::Number>().DoubleValue() == -1.0) {
    spec.device = -1;
  } else {
    spec.device = static_cast<int>(field_u64(js, "device", "device", false).value_or(0));
  }
  spec.peer_access = field_devices(js, "peerAccess", "peerAccess");
  spec.limit_bytes = field_u64(js, "limitBytes", "limitBytes", true);
  spec.tracking_capacity = field_u64(js, "trackingCapacity", "trackingCapacity", true);
  spec.address_only = field_bool(js, "addressOnly", "addressOnly").value_or(false);
  if (auto fault = field_object(js, "faultInjection", "faultInjection")) {
    known_keys(*fault, {"failEvery", "failAfterBytes"}, "faultInjection");
    fault_spec f;
    f.fail_every = field_u64(*fault, "failEvery", "faultInjection.failEvery", true);
    f.fail_after_bytes = field_u64(*fault, "failAfterBytes", "faultInjection.failAfterBytes", false);
    spec.fault_injection = f;
  }
  const Napi::Object options = field_object(js, "options", "options").value_or(Napi::Object::New(js.Env()));
  Napi::Array names = options.GetPropertyNames();
  for (std::uint32_t i = 0; i < names.Length(); ++i) {
    const std::string key = names.Get(i).ToString().Utf8Value();
    const option_descriptor* option = descriptor.option(key);
    if (option == nullptr || !(option->fronts & front_js)) {
      throw invalid_argument(invalid_argument::kind::type, key,
                             "Unknown option '" + key + "' in the options of '" + descriptor.name +
                                 "'; expected one of: " + descriptor.option_keys(front_js));
    }
  }
  for (const option_descriptor& option : descriptor.options) {
    if (!(option.fronts & front_js)) continue;
    const option_value v = field_option(options, option);
    if (!std::holds_alternative<std::monostate>(v)) option.apply(spec, v);
  }
  return spec;
}

// Bytes and data pointer of an ArrayBufferView.
std::pair<std::uint8_t*, std::size_t> view_bytes(const Napi::Value& v) {
  if (v.IsTypedArray()) {
    auto ta = v.As<Napi::TypedArray>();
    return {static_cast<std::uint8_t*>(ta.ArrayBuffer().Data()) + ta.ByteOffset(), ta.ByteLength()};
  }
  if (v.IsDataView()) {
    auto dv = v.As<Napi::DataView>();
    return {static_cast<std::uint8_t*>(dv.ArrayBuffer().Data()) + dv.ByteOffset(), dv.ByteLength()};
  }
  throw invalid_argument(invalid_argument::kind::type, "data", "Expected data to be a TypedArray, Buffer or DataView");
}

}  // namespace

Napi::Value Strategies(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] {
    // The registry's one serialiser (strategies_json, which libgpumem_torch returns as it is), in the
    // shape the addon has always given: the options JavaScript takes, and no key that holds nothing.
    Napi::Env env = info.Env();
    Napi::Object json = env.Global().Get("JSON").As<Napi::Object>();
    Napi::Array all = json.Get("parse").As<Napi::Function>().Call(json, {Napi::String::New(env, strategies_json())}).As<Napi::Array>();
    for (std::uint32_t i = 0; i < all.Length(); ++i) {
      Napi::Object o = all.Get(i).As<Napi::Object>();
      o.Delete("aliases");
      if (o.Get("wraps").As<Napi::String>().Utf8Value().empty()) o.Delete("wraps");
      Napi::Array listed = o.Get("options").As<Napi::Array>();
      Napi::Array options = Napi::Array::New(env);
      std::uint32_t n = 0;
      for (std::uint32_t k = 0; k < listed.Length(); ++k) {
        Napi::Object oo = listed.Get(k).As<Napi::Object>();
        if (!oo.Get("js").ToBoolean().Value()) continue;  // libgpumem_torch's own settings
        const std::string kind = oo.Get("kind").As<Napi::String>().Utf8Value();
        if (kind != option_kind_name(option_kind::bytes) && kind != option_kind_name(option_kind::count)) oo.Delete("minimum");
        if (kind != option_kind_name(option_kind::choice)) oo.Delete("choices");
        if (oo.Get("default").IsNull()) oo.Delete("default");
        if (oo.Get("doc").As<Napi::String>().Utf8Value().empty()) oo.Delete("doc");
        if (!oo.Get("placement").ToBoolean().Value()) oo.Delete("placement");
        for (const char* key : {"js", "env", "envAliases"}) oo.Delete(key);
        options.Set(n++, oo);
      }
      o.Set("options", options);
      // the flags JavaScript has (GPUMEM_STRATEGY_FLAGS' front)
      Napi::Object flags = o.Get("flags").As<Napi::Object>();
#define GPUMEM_FLAG_JS_ONLY(member, key, front, doc) \
  if (!((front) & front_js)) flags.Delete(key);
      GPUMEM_STRATEGY_FLAGS(GPUMEM_FLAG_JS_ONLY)
#undef GPUMEM_FLAG_JS_ONLY
    }
    return static_cast<Napi::Value>(all);
  });
}

Napi::Value CheckSpec(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    if (!info[0].IsObject() || info[0].IsArray()) bad_type("spec", "an object", info[0]);
    validate(to_chain_spec(info[0].As<Napi::Object>()));
  });
}

Napi::Value StrategyFlags(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] {
    // [{ key, doc }]: the flags JavaScript has, for code generation (scripts/sync-strategies.mjs)
    Napi::Env env = info.Env();
    Napi::Object json = env.Global().Get("JSON").As<Napi::Object>();
    Napi::Array all =
        json.Get("parse").As<Napi::Function>().Call(json, {Napi::String::New(env, strategy_flags_json())}).As<Napi::Array>();
    Napi::Array out = Napi::Array::New(env);
    std::uint32_t n = 0;
    for (std::uint32_t i = 0; i < all.Length(); ++i) {
      Napi::Object f = all.Get(i).As<Napi::Object>();
      if (!f.Get("js").ToBoolean().Value()) continue;
      f.Delete("js");
      out.Set(n++, f);
    }
    return static_cast<Napi::Value>(out);
  });
}

Napi::Function ResourceObject::Define(Napi::Env env) {
  Napi::Function cls = DefineClass(env, "Resource",
                     {InstanceMethod<&ResourceObject::Prefetch>("prefetch"),
                      InstanceMethod<&ResourceObject::RecordStream>("recordStream"),
                      InstanceMethod<&ResourceObject::Stats>("stats"),
                      InstanceMethod<&ResourceObject::ResetPeak>("resetPeak"),
                      InstanceMethod<&ResourceObject::Trim>("trim"),
                      InstanceMethod<&ResourceObject::Write>("write"),
                      InstanceMethod<&ResourceObject::Read>("read"),
                      InstanceMethod<&ResourceObject::Dispose>("dispose"),
                      InstanceMethod<&ResourceObject::TrackingEvents>("trackingEvents"),
                      InstanceMethod<&ResourceObject::SetTrackingTag>("setTrackingTag"),
                      InstanceMethod<&ResourceObject::SetTrackingEnabled>("setTrackingEnabled"),
                      InstanceMethod<&ResourceObject::SetPlacement>("setPlacement"),
                      InstanceMethod<&ResourceObject::FastPath>("fastPath"),
                      InstanceMethod<&ResourceObject::ShareHandle>("shareHandle"),
                      InstanceMethod<&ResourceObject::Sleepable>("sleepable"),
                      InstanceMethod<&ResourceObject::Sleep>("sleep"),
                      InstanceMethod<&ResourceObject::ReserveBackup>("reserveBackup"),
                      InstanceMethod<&ResourceObject::Wake>("wake"),
                      InstanceMethod<&ResourceObject::TagStats>("tagStats"),
                      InstanceMethod<&ResourceObject::TrimBackup>("trimBackup"),
                      StaticMethod<&ResourceObject::SetThreadTag>("setThreadTag")});
  // Kept so that from() can tell a Resource from any other object (one addon instance per env).
  env.SetInstanceData<Napi::FunctionReference>(new Napi::FunctionReference(Napi::Persistent(cls)));
  return cls;
}

ResourceObject& ResourceObject::from(const Napi::Value& v, const char* name) {
  auto* cls = v.Env().GetInstanceData<Napi::FunctionReference>();
  if (!v.IsObject() || cls == nullptr || !v.As<Napi::Object>().InstanceOf(cls->Value())) {
    throw invalid_argument(invalid_argument::kind::type, name,
                           std::string("Expected a native Resource for ") + name + " but received " + describe(v));
  }
  return *Unwrap(v.As<Napi::Object>());
}

void ResourceObject::check_range(void* ptr, std::uint64_t offset, std::uint64_t bytes) {
  std::size_t size = top().allocation_size(ptr);
  if (size == 0) throw_unknown_pointer(ptr);
  if (offset > size || bytes > size - offset) {
    throw invalid_argument(invalid_argument::kind::range, "offset",
                           "Expected offset + length <= " + std::to_string(size) + " (the allocation's size) but received offset " +
                               std::to_string(offset) + " and length " + std::to_string(bytes));
  }
}

ResourceObject::ResourceObject(const Napi::CallbackInfo& info) : Napi::ObjectWrap<ResourceObject>(info) {
  guarded(info.Env(), [&] {
    if (!info[0].IsObject()) throw invalid_argument(invalid_argument::kind::type, "spec", "Expected a resource spec object");
    try {
      const Napi::Object spec = info[0].As<Napi::Object>();
      if (spec.Has("type") && get_string(spec, "type", "") == "shared") {
        attach_shared(get_u64(spec, "token", 0));
      } else {
        chain_.emplace(build_chain(to_chain_spec(spec)));
        tracker_ = chain_->tracker;
      }
    } catch (...) {
      release_chain();
      throw;
    }
    return 0;
  });
}

ResourceObject::~ResourceObject() { release_chain(); }

void ResourceObject::release_chain() noexcept {
  tracker_ = nullptr;
  release_shared();
  chain_.reset();  // top first: adaptors before their upstreams
}

memory_resource& ResourceObject::top() {
  if (shared_) return shared_->chain.top();
  if (!chain_) throw invalid_state("the allocator has been disposed");
  return chain_->top();
}

Napi::Value ResourceObject::Prefetch(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] {
    bool moved = top().prefetch(to_pointer(info[0]), to_u64(info[1]),
                                info[2].ToBoolean().Value() ? placement::device : placement::host, to_stream(info[3]));
    return Napi::Boolean::New(info.Env(), moved);
  });
}

Napi::Value ResourceObject::RecordStream(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] { top().record_stream(to_pointer(info[0]), to_stream(info[1])); });
}

// A chain that can sleep adds sleptBytes: the device bytes its sleeping tags gave back.
Napi::Value ResourceObject::Stats(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] {
    Napi::Object o = from_stats(info.Env(), top().stats());
    if (sleepable* s = sleeper()) {
      std::uint64_t slept = 0;
      for (const tag_state& t : s->tag_states()) slept += t.slept_bytes;
      o.Set("sleptBytes", Napi::Number::New(info.Env(), static_cast<double>(slept)));
    }
    return o;
  });
}

Napi::Value ResourceObject::ResetPeak(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] { top().reset_peak(); });
}

Napi::Value ResourceObject::Trim(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] { top().trim(info[0].IsUndefined() ? 0 : to_u64(info[0])); });
}

// write(ptr, offset, view, stream) / read(ptr, offset, view, stream): one checked copy between a
// host buffer and [ptr + offset, + view length) of a live allocation.
Napi::Value ResourceObject::Copy(const Napi::CallbackInfo& info, bool to_allocation) {
  return guarded(info.Env(), [&] {
    memory_resource& r = top();
    void* ptr = to_pointer(info[0]);
    std::uint64_t offset = to_u64(info[1]);
    auto [data, bytes] = view_bytes(info[2]);
    check_range(ptr, offset, bytes);
    std::uint8_t* target = static_cast<std::uint8_t*>(ptr) + offset;
    if (bytes == 0) return info.Env().Undefined();
    // A sleeping tag's memory is unmapped: copying would fault (SIGSEGV on the host twin, a sticky
    // CUDA error on a device). InvalidStateError instead.
    if (sleepable* s = sleeper()) s->check_awake(target, bytes);
    if (to_allocation) copy_to(target, r.kind(), data, bytes, to_stream(info[3]));
    else copy_from(data, target, r.kind(), bytes, to_stream(info[3]));
    return info.Env().Undefined();
  });
}

Napi::Value ResourceObject::Write(const Napi::CallbackInfo& info) { return Copy(info, true); }
Napi::Value ResourceObject::Read(const Napi::CallbackInfo& info) { return Copy(info, false); }

Napi::Value ResourceObject::Dispose(const Napi::CallbackInfo& info) {
  release_chain();
  return info.Env().Undefined();
}

Napi::Value ResourceObject::TrackingEvents(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] {
    Napi::Env env = info.Env();
    top();
    if (tracker_ == nullptr) throw invalid_state("this allocator has no tracking layer (create it with tracking enabled)");
    auto events = tracker_->events(info[0].ToBoolean().Value());
    const std::size_t n = events.size();
    auto time = Napi::Float64Array::New(env, n);
    auto pointer = Napi::Float64Array::New(env, n);
    auto bytes = Napi::Float64Array::New(env, n);
    auto stream = Napi::Float64Array::New(env, n);
    auto reserved = Napi::Float64Array::New(env, n);
    auto tag = Napi::Uint32Array::New(env, n);
    auto action = Napi::Uint8Array::New(env, n);
    for (std::size_t i = 0; i < n; ++i) {
      time[i] = static_cast<double>(events[i].time_ns);
      pointer[i] = static_cast<double>(events[i].pointer);
      bytes[i] = static_cast<double>(events[i].bytes);
      stream[i] = static_cast<double>(events[i].stream);
      reserved[i] = static_cast<double>(events[i].reserved_bytes);
      tag[i] = events[i].tag;
      action[i] = events[i].action;
    }
    Napi::Object o = Napi::Object::New(env);
    o.Set("timeNs", time);
    o.Set("pointer", pointer);
    o.Set("bytes", bytes);
    o.Set("stream", stream);
    o.Set("reservedBytes", reserved);
    o.Set("tag", tag);
    o.Set("action", action);
    o.Set("dropped", Napi::Number::New(env, static_cast<double>(tracker_->dropped())));
    return o;
  });
}

Napi::Value ResourceObject::SetTrackingTag(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    top();
    if (tracker_ != nullptr) tracker_->set_tag(static_cast<std::uint32_t>(to_u64(info[0])));
  });
}

Napi::Value ResourceObject::SetTrackingEnabled(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    top();
    if (tracker_ != nullptr) tracker_->set_enabled(info[0].ToBoolean().Value());
  });
}

// setPlacement('auto' | 'device' | 'host'): where the tiered strategy puts allocations from now on.
Napi::Value ResourceObject::SetPlacement(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    top();  // throws after dispose
    placeable* placer = shared_ ? shared_->chain.placer : chain_->placer;
    if (placer == nullptr) throw invalid_state("setPlacement: only the 'tiered' strategy places memory by tier");
    if (!info[0].IsString()) {
      throw invalid_argument(invalid_argument::kind::type, "placement",
                             "Expected one of 'auto', 'device', 'host' for placement but received " + describe(info[0]));
    }
    placer->set_placement(parse_placement_choice(info[0].As<Napi::String>().Utf8Value().c_str()));
  });
}

sleepable* ResourceObject::sleeper() {
  top();  // throws after dispose
  return shared_ ? shared_->chain.sleeper : chain_->sleeper;
}

sleepable& ResourceObject::need_sleeper() {
  sleepable* s = sleeper();
  if (s == nullptr) throw invalid_state("this strategy cannot sleep (only strategies with the registry's sleep flag do)");
  return *s;
}

Napi::Value ResourceObject::Sleepable(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] { return Napi::Boolean::New(info.Env(), sleeper() != nullptr); });
}

Napi::Value ResourceObject::Sleep(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] {
    sleepable& s = need_sleeper();
    bool names_no_tag = false;
    const sleep_request request = to_sleep_request(info[0], &names_no_tag);
    // An empty list names no tag: nothing sleeps (the core reads an empty list as every tag).
    if (names_no_tag) return from_sleep_report(info.Env(), sleep_report{});
    return from_sleep_report(info.Env(), s.sleep(request));
  });
}

Napi::Value ResourceObject::Wake(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] {
    sleepable& s = need_sleeper();
    return from_sleep_report(info.Env(), s.wake(to_tags(info[0], "tags")));
  });
}

Napi::Value ResourceObject::TagStats(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] { return from_tag_states(info.Env(), need_sleeper().tag_states()); });
}

// reserveBackup(bytes): starts pinning host memory for later sleeps in the background.
Napi::Value ResourceObject::ReserveBackup(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] { need_sleeper().reserve_backup(to_u64(info[0])); });
}

Napi::Value ResourceObject::TrimBackup(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] { need_sleeper().trim_backup(); });
}

Napi::Value ResourceObject::SetThreadTag(const Napi::CallbackInfo& info) {
  return guarded_undefined(info.Env(), [&] {
    if (info[0].IsUndefined() || info[0].IsNull()) {
      set_thread_tag(std::nullopt);
    } else if (info[0].IsString()) {
      set_thread_tag(intern_tag(info[0].As<Napi::String>().Utf8Value()));
    } else {
      throw invalid_argument(invalid_argument::kind::type, "tag",
                             "Expected a tag name (string) or undefined for tag but received " + describe(info[0]));
    }
  });
}

Napi::Value ResourceObject::FastPath(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] {
    Napi::Env env = info.Env();
    if (!info[0].IsTypedArray() || info[0].As<Napi::TypedArray>().TypedArrayType() != napi_float64_array ||
        info[0].As<Napi::Float64Array>().ElementLength() < 3) {
      throw invalid_argument(invalid_argument::kind::type, "args", "Expected a Float64Array of at least 3 elements for args");
    }
    auto args = info[0].As<Napi::Float64Array>();
    fast_args_ = args.Data();
    fast_args_ref_ = Napi::Persistent(args);
    napi_value allocate = nullptr, deallocate = nullptr;
    NAPI_THROW_IF_FAILED(env, napi_create_function(env, "allocate", NAPI_AUTO_LENGTH, FastAllocate, this, &allocate),
                         Napi::Value());
    NAPI_THROW_IF_FAILED(env, napi_create_function(env, "deallocate", NAPI_AUTO_LENGTH, FastDeallocate, this, &deallocate),
                         Napi::Value());
    Napi::Object o = Napi::Object::New(env);
    o.Set("allocate", Napi::Value(env, allocate));
    o.Set("deallocate", Napi::Value(env, deallocate));
    return static_cast<Napi::Value>(o);
  });
}

namespace {
// Runs f with the ResourceObject the raw callback was created for (its data); a C++ exception
// becomes a pending JavaScript exception (raw callbacks must not throw).
template <class F>
napi_value run_fast(napi_env env, napi_callback_info info, F&& f) {
  void* data = nullptr;
  napi_get_cb_info(env, info, nullptr, nullptr, nullptr, &data);
  try {
    f(*static_cast<ResourceObject*>(data));
  } catch (...) {
    try {
      throw_js(Napi::Env(env));
    } catch (const Napi::Error& e) {
      e.ThrowAsJavaScriptException();
    }
  }
  return nullptr;
}
}  // namespace

napi_value ResourceObject::FastAllocate(napi_env env, napi_callback_info info) {
  return run_fast(env, info, [](ResourceObject& self) {
    double* a = self.fast_args_;
    const auto bytes = static_cast<std::size_t>(a[0]);
    void* ptr = nullptr;
    try {
      ptr = self.top().allocate(bytes, reinterpret_cast<stream_handle>(static_cast<std::uintptr_t>(a[1])));
    } catch (const std::bad_alloc&) {
      // The host's own memory or address space (RLIMIT_AS) ran out inside the strategy: to the
      // caller this request failed for want of memory, like any other (the strategy is unchanged).
      throw out_of_memory("out of host memory allocating " + format_bytes(bytes) +
                              " (std::bad_alloc: the host's memory or address space is exhausted)",
                          bytes, self.top().stats());
    }
    a[2] = static_cast<double>(reinterpret_cast<std::uintptr_t>(ptr));
  });
}

napi_value ResourceObject::FastDeallocate(napi_env env, napi_callback_info info) {
  return run_fast(env, info, [](ResourceObject& self) {
    double* a = self.fast_args_;
    self.top().deallocate(reinterpret_cast<void*>(static_cast<std::uintptr_t>(a[2])), static_cast<std::size_t>(a[0]),
                          reinterpret_cast<stream_handle>(static_cast<std::uintptr_t>(a[1])));
  });
}

// Sharing one chain between threads: a process-wide table from token to chain. It holds weak
// references, so it never keeps a chain alive by itself; a token is revoked when the object that
// issued it lets go, after which no new thread can attach (those attached keep working).
namespace {

struct share_table {
  std::mutex mutex;
  std::unordered_map<std::uint64_t, std::weak_ptr<shared_chain>> chains;
  std::uint64_t next = 1;
};

// Never destroyed: a worker thread's objects may be finalised after the main thread's statics.
share_table& shares() {
  static share_table* table = new share_table();
  return *table;
}

}  // namespace

Napi::Value ResourceObject::ShareHandle(const Napi::CallbackInfo& info) {
  return guarded(info.Env(), [&] {
    top();  // throws after dispose
    if (!shared_) {
      shared_ = std::make_shared<shared_chain>(std::move(*chain_));
      chain_.reset();
    }
    if (share_token_ == 0) {
      share_table& table = shares();
      std::lock_guard<std::mutex> lock(table.mutex);
      share_token_ = table.next++;
      table.chains.emplace(share_token_, shared_);
    }
    return Napi::Number::New(info.Env(), static_cast<double>(share_token_));
  });
}

void ResourceObject::attach_shared(std::uint64_t token) {
  share_table& table = shares();
  std::lock_guard<std::mutex> lock(table.mutex);
  auto it = table.chains.find(token);
  std::shared_ptr<shared_chain> chain = it == table.chains.end() ? nullptr : it->second.lock();
  if (!chain) {
    throw invalid_state("no shared allocator has token " + std::to_string(token) +
                        " (never issued, or the allocator that shared it has been disposed)");
  }
  shared_ = std::move(chain);
  tracker_ = shared_->chain.tracker;
}

void ResourceObject::release_shared() noexcept {
  if (share_token_ != 0) {
    try {
      share_table& table = shares();
      std::lock_guard<std::mutex> lock(table.mutex);
      table.chains.erase(share_token_);
    } catch (...) {
      // a failed lock leaves a weak entry behind, which attaches only while the chain lives
    }
    share_token_ = 0;
  }
  shared_.reset();  // the chain goes with its last holder
}

}  // namespace gpumem::binding
