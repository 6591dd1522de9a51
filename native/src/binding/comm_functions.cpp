#include "comm_functions.hpp"

#ifdef __linux__
#include <sys/prctl.h>
#include <unistd.h>

#include <csignal>
#endif

#include <cmath>
#include <cstring>
#include <memory>
#include <string>

#include "comm/comm_errors.hpp"
#include "comm/host_communicator.hpp"
#include "comm/nccl_communicator.hpp"
#include "comm/nccl_library.hpp"
#include "comm/staging.hpp"
#include "convert.hpp"
#include "function_helpers.hpp"
#include "gpumem/device.hpp"
#include "gpumem/errors.hpp"

namespace gpumem::binding {
namespace {

// guarded, plus the communicators' own errors: comm_aborted becomes an Error with code
// GPUMEM_COMM_ABORTED, nccl_error one with code GPUMEM_NCCL, ncclResult and ncclResultName.
template <class F>
auto comm_guarded(Napi::Env env, F&& f) -> decltype(f()) {
  return guarded(env, [&]() -> decltype(f()) {
    try {
      return f();
    } catch (const comm::comm_aborted& e) {
      Napi::Error error = Napi::Error::New(env, e.what());
      error.Set("code", Napi::String::New(env, "GPUMEM_COMM_ABORTED"));
      throw error;
    } catch (const comm::nccl_error& e) {
      Napi::Error error = Napi::Error::New(env, e.what());
      error.Set("code", Napi::String::New(env, "GPUMEM_NCCL"));
      error.Set("ncclResult", Napi::Number::New(env, e.result()));
      error.Set("ncclResultName", Napi::String::New(env, e.name()));
      throw error;
    }
  });
}

// Arguments are checked by the TypeScript layer; these keep a hand-made call from crashing.
double number_arg(const Napi::Value& v, const char* name, double min, double max, const char* expected) {
  if (!v.IsNumber()) {
    throw invalid_argument(invalid_argument::kind::type, name, std::string("Expected ") + expected + " for " + name + " but received " + describe(v));
  }
  const double d = v.As<Napi::Number>().DoubleValue();
  if (!(d >= min && d <= max) || std::floor(d) != d) {
    throw invalid_argument(invalid_argument::kind::range, name, std::string("Expected ") + expected + " for " + name + " but received " + describe(v));
  }
  return d;
}
constexpr double max_safe = 9007199254740991.0;
int int_arg(const Napi::Value& v, const char* name, int min) {
  return static_cast<int>(number_arg(v, name, min, 2147483647.0, min < 0 ? "an integer >= -1" : "a non-negative integer"));
}
std::uint64_t count_arg(const Napi::Value& v) { return static_cast<std::uint64_t>(number_arg(v, "count", 1, max_safe, "positive integer")); }
float* pointer_arg(const Napi::Value& v, const char* name) {
  return static_cast<float*>(to_pointer(Napi::Number::New(v.Env(), number_arg(v, name, 1, max_safe, "a pointer (positive integer)"))));
}
stream_handle stream_arg(const Napi::Value& v) {
  if (v.IsUndefined() || v.IsNull()) return nullptr;
  return to_pointer(Napi::Number::New(v.Env(), number_arg(v, "stream", 0, max_safe, "a stream handle (non-negative integer)")));
}
std::string string_arg(const Napi::Value& v, const char* name) {
  if (!v.IsString()) throw invalid_argument(invalid_argument::kind::type, name, std::string("Expected string for ") + name + " but received " + describe(v));
  return v.As<Napi::String>().Utf8Value();
}

// The collectives and lifetime methods of both classes, over a communicator type C.
template <class Self, class C>
class comm_object : public Napi::ObjectWrap<Self> {
 public:
  explicit comm_object(const Napi::CallbackInfo& info) : Napi::ObjectWrap<Self>(info) {}

  static Napi::Function define(Napi::Env env, const char* name) {
    // The handlers are comm_object's: passed as arguments (not template arguments) so that they
    // convert to members of Self.
    using wrap = Napi::ObjectWrap<Self>;
    return wrap::DefineClass(env, name,
                             {wrap::InstanceMethod("allReduce", &comm_object::AllReduce),
                              wrap::InstanceMethod("allGather", &comm_object::AllGather),
                              wrap::InstanceMethod("broadcast", &comm_object::Broadcast),
                              wrap::InstanceMethod("abort", &comm_object::Abort),
                              wrap::InstanceMethod("destroy", &comm_object::Destroy)});
  }

 protected:
  std::unique_ptr<C> comm_;

 private:
  C& comm() {
    if (!comm_) throw invalid_state("this communicator has been destroyed");
    return *comm_;
  }
  Napi::Value AllReduce(const Napi::CallbackInfo& info) {
    return comm_guarded(info.Env(), [&] {
      comm().all_reduce(pointer_arg(info[0], "buffer"), count_arg(info[1]), stream_arg(info[2]));
      return info.Env().Undefined();
    });
  }
  Napi::Value AllGather(const Napi::CallbackInfo& info) {
    return comm_guarded(info.Env(), [&] {
      comm().all_gather(pointer_arg(info[0], "send"), pointer_arg(info[1], "recv"), count_arg(info[2]), stream_arg(info[3]));
      return info.Env().Undefined();
    });
  }
  Napi::Value Broadcast(const Napi::CallbackInfo& info) {
    return comm_guarded(info.Env(), [&] {
      comm().broadcast(pointer_arg(info[0], "buffer"), count_arg(info[1]), int_arg(info[2], "root", 0), stream_arg(info[3]));
      return info.Env().Undefined();
    });
  }
  Napi::Value Abort(const Napi::CallbackInfo& info) {
    return comm_guarded(info.Env(), [&] {
      comm().abort(string_arg(info[0], "reason"));
      return info.Env().Undefined();
    });
  }
  Napi::Value Destroy(const Napi::CallbackInfo& info) {
    comm_.reset();
    return info.Env().Undefined();
  }
};

// HostComm(name, size, rank, device, timeoutMs): device -1 for host buffers.
class HostComm : public comm_object<HostComm, comm::host_communicator> {
 public:
  explicit HostComm(const Napi::CallbackInfo& info) : comm_object(info) {
    comm_guarded(info.Env(), [&] {
      const std::string name = string_arg(info[0], "name");
      const int size = int_arg(info[1], "size", 0);
      const int rank = int_arg(info[2], "rank", 0);
      const int device = int_arg(info[3], "device", -1);
      const auto timeout = static_cast<std::uint64_t>(number_arg(info[4], "timeoutMs", 0, max_safe, "non-negative integer"));
      comm_ = std::make_unique<comm::host_communicator>(name, size, rank, device, timeout);
    });
  }
};

#ifdef GPUMEM_WITH_CUDA
using nccl_impl = comm::nccl_communicator;
#else
// Without CUDA there is no NCCL communicator: the constructor says so.
struct nccl_impl {
  void all_reduce(float*, std::uint64_t, stream_handle) {}
  void all_gather(const float*, float*, std::uint64_t, stream_handle) {}
  void broadcast(float*, std::uint64_t, int, stream_handle) {}
  void abort(const std::string&) {}
};
#endif

// NcclComm(uniqueId: Buffer(128), size, rank, device).
class NcclComm : public comm_object<NcclComm, nccl_impl> {
 public:
  explicit NcclComm(const Napi::CallbackInfo& info) : comm_object(info) {
    comm_guarded(info.Env(), [&] {
      const bool bytes = info[0].IsTypedArray() && info[0].As<Napi::TypedArray>().TypedArrayType() == napi_uint8_array;
      if (!bytes || info[0].As<Napi::Uint8Array>().ByteLength() != comm::nccl::unique_id_bytes) {
        throw invalid_argument(invalid_argument::kind::type, "uniqueId",
                               "Expected a Uint8Array of " + std::to_string(comm::nccl::unique_id_bytes) + " bytes (from ncclUniqueId()) for uniqueId but received " + describe(info[0]));
      }
      comm::nccl::unique_id id{};
      std::memcpy(id.internal, info[0].As<Napi::Uint8Array>().Data(), sizeof id.internal);
      const int size = int_arg(info[1], "size", 0);
      const int rank = int_arg(info[2], "rank", 0);
      const int device = int_arg(info[3], "device", 0);
#ifdef GPUMEM_WITH_CUDA
      comm_ = std::make_unique<comm::nccl_communicator>(id, size, rank, device);
#else
      (void)size, (void)rank, (void)device;
      throw invalid_state("NCCL needs a build of gpumem with CUDA support (no CUDA toolkit when it was built)");
#endif
    });
  }
};

Napi::Value NcclLibrary(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  try {
    const comm::nccl::load_status s = comm::nccl::status();
    o.Set("available", s.loaded && built_with_cuda());
    o.Set("path", s.path);
    if (s.loaded) o.Set("version", s.version);
    if (!s.loaded) o.Set("reason", s.error);
    else if (!built_with_cuda()) o.Set("reason", "NCCL needs a build of gpumem with CUDA support (no CUDA toolkit when it was built)");
  } catch (const std::exception& e) {
    o.Set("available", false);
    o.Set("reason", e.what());
  }
  return o;
}

Napi::Value NcclUniqueId(const Napi::CallbackInfo& info) {
  return comm_guarded(info.Env(), [&] {
    const comm::nccl::functions& f = comm::nccl::api();
    comm::nccl::unique_id id{};
    comm::nccl::check(f.get_unique_id(&id), "ncclGetUniqueId");
    return Napi::Buffer<char>::Copy(info.Env(), id.internal, sizeof id.internal);
  });
}

Napi::Value HostCommRegionCreate(const Napi::CallbackInfo& info) {
  return comm_guarded(info.Env(), [&] {
    const int size = int_arg(info[0], "size", 0);
    const auto slot = info[1].IsUndefined() ? comm::default_host_slot_bytes
                                            : static_cast<std::uint64_t>(number_arg(info[1], "slotBytes", 1, max_safe, "positive integer"));
    return Napi::String::New(info.Env(), comm::create_host_region(size, slot, info[2].ToBoolean().Value()));
  });
}

Napi::Value HostCommRegionAbort(const Napi::CallbackInfo& info) {
  return comm_guarded(info.Env(), [&] {
    comm::abort_host_region(string_arg(info[0], "name"), int_arg(info[1], "rank", -1), string_arg(info[2], "reason"));
    return info.Env().Undefined();
  });
}

Napi::Value HostCommRegionUnlink(const Napi::CallbackInfo& info) {
  return comm_guarded(info.Env(), [&] { return Napi::Boolean::New(info.Env(), comm::unlink_host_region(string_arg(info[0], "name"))); });
}

// dieWithParent(parentPid): asks the kernel to kill this process (SIGKILL) when its parent dies
// (Linux: PR_SET_PDEATHSIG), then checks that the parent is still parentPid, since it may have
// died before the request. Returns 'armed' (the kernel will do it), 'orphaned' (the parent is gone
// already: the caller must exit) or 'unsupported' (no such request on this system: the caller
// watches its parent itself).
Napi::Value DieWithParent(const Napi::CallbackInfo& info) {
  return comm_guarded(info.Env(), [&] {
    const int parent = int_arg(info[0], "parentPid", 1);
#ifdef __linux__
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) return Napi::String::New(info.Env(), "unsupported");
    return Napi::String::New(info.Env(), getppid() == parent ? "armed" : "orphaned");
#else
    (void)parent;
    return Napi::String::New(info.Env(), "unsupported");
#endif
  });
}

// stageOut(ptr, device, stream, target: Float32Array): the target's length of f32 at `ptr` (host
// memory, device -1, or memory on that CUDA device, after the stream's queued work) into target.
// stageIn(ptr, device, stream, source: Float32Array): the source into `ptr`, ordered the same way.
// Both return once the copy is done.
Napi::Float32Array f32_array_arg(const Napi::Value& v, const char* name) {
  return typed_array_arg<Napi::Float32Array>(v, napi_float32_array, name, "Float32Array");
}
Napi::Value StageOut(const Napi::CallbackInfo& info) {
  return comm_guarded(info.Env(), [&] {
    Napi::Float32Array target = f32_array_arg(info[3], "target");
    if (target.ElementLength() > 0)
      comm::stage_copy(target.Data(), pointer_arg(info[0], "ptr"), target.ElementLength(), int_arg(info[1], "device", -1), stream_arg(info[2]));
    return info.Env().Undefined();
  });
}
Napi::Value StageIn(const Napi::CallbackInfo& info) {
  return comm_guarded(info.Env(), [&] {
    Napi::Float32Array source = f32_array_arg(info[3], "source");
    if (source.ElementLength() > 0)
      comm::stage_copy(pointer_arg(info[0], "ptr"), source.Data(), source.ElementLength(), int_arg(info[1], "device", -1), stream_arg(info[2]));
    return info.Env().Undefined();
  });
}

}  // namespace

void register_comm(Napi::Env env, Napi::Object exports) {
  exports.Set("ncclLibrary", Napi::Function::New<NcclLibrary>(env, "ncclLibrary"));
  exports.Set("ncclUniqueId", Napi::Function::New<NcclUniqueId>(env, "ncclUniqueId"));
  exports.Set("NcclComm", NcclComm::define(env, "NcclComm"));
  exports.Set("HostComm", HostComm::define(env, "HostComm"));
  exports.Set("hostCommRegionCreate", Napi::Function::New<HostCommRegionCreate>(env, "hostCommRegionCreate"));
  exports.Set("hostCommRegionAbort", Napi::Function::New<HostCommRegionAbort>(env, "hostCommRegionAbort"));
  exports.Set("hostCommRegionUnlink", Napi::Function::New<HostCommRegionUnlink>(env, "hostCommRegionUnlink"));
  exports.Set("commStageOut", Napi::Function::New<StageOut>(env, "commStageOut"));
  exports.Set("commStageIn", Napi::Function::New<StageIn>(env, "commStageIn"));
  exports.Set("dieWithParent", Napi::Function::New<DieWithParent>(env, "dieWithParent"));
}

}  // namespace gpumem::binding
