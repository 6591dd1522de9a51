// NCCL through dlopen: see nccl_library.hpp.
#include "nccl_library.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "comm_errors.hpp"
#include "gpumem/errors.hpp"

namespace gpumem::comm::nccl {
namespace {

struct library {
  std::mutex mutex;
  load_status status;
  functions fns;
};

library& lib() {
  static library l;
  return l;
}

template <class F>
bool resolve(void* handle, const char* symbol, F& out) {
  out = reinterpret_cast<F>(dlsym(handle, symbol));
  return out != nullptr;
}

void try_load(library& l) {
  const char* env = std::getenv("GPUMEM_NCCL_LIB");
  const bool from_env = env != nullptr && *env != '\0';
  const std::string path = from_env ? env : "libnccl.so.2";
  l.status = load_status{};
  l.status.path = path;
  const std::string hint =
      "; set GPUMEM_NCCL_LIB to the path of libnccl.so.2 (PyTorch's wheels ship one under site-packages/nvidia/nccl/lib)";
  dlerror();
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* e = dlerror();
    l.status.error = "NCCL not found: dlopen('" + path + "')" + (from_env ? " (GPUMEM_NCCL_LIB)" : "") + " failed: " +
                     (e != nullptr ? e : "unknown error") + hint;
    return;
  }
  functions f;
  std::string missing;
  auto need = [&](const char* symbol, auto& out) {
    if (!resolve(h, symbol, out)) missing += std::string(missing.empty() ? "" : ", ") + symbol;
  };
  need("ncclGetVersion", f.get_version);
  need("ncclGetUniqueId", f.get_unique_id);
  need("ncclCommInitRank", f.comm_init_rank);
  need("ncclAllReduce", f.all_reduce);
  need("ncclAllGather", f.all_gather);
  need("ncclBroadcast", f.broadcast);
  need("ncclCommAbort", f.comm_abort);
  need("ncclCommDestroy", f.comm_destroy);
  need("ncclCommGetAsyncError", f.comm_get_async_error);
  need("ncclGetErrorString", f.get_error_string);
  resolve(h, "ncclGetLastError", f.get_last_error);
  int version = 0;
  if (missing.empty() && f.get_version(&version) != ncclSuccess) missing = "a working ncclGetVersion";
  if (!missing.empty()) {
    dlclose(h);
    l.status.error = "NCCL at '" + path + "' is not usable: it lacks " + missing + hint;
    return;
  }
  l.fns = f;
  l.status.loaded = true;
  l.status.version = version;  // the library stays loaded for the process's life
}

}  // namespace

load_status status() {
  library& l = lib();
  std::lock_guard<std::mutex> lock(l.mutex);
  if (!l.status.loaded) try_load(l);
  return l.status;
}

const functions& api() {
  const load_status s = status();
  if (!s.loaded) throw invalid_state(s.error);
  return lib().fns;
}

const char* result_name(result_t result) {
  switch (result) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    case ncclTimeout: return "ncclTimeout";
    default: return "ncclUnknownResult";
  }
}

std::string describe(result_t result, comm_t comm) {
  const functions& f = lib().fns;
  std::string text = std::string(result_name(result)) + " (" + std::to_string(result) + ")";
  if (f.get_error_string != nullptr) text += ": " + std::string(f.get_error_string(result));
  if (f.get_last_error != nullptr) {
    const char* last = f.get_last_error(comm);
    if (last != nullptr && *last != '\0') text += ": " + std::string(last);
  }
  return text;
}

void check(result_t result, const char* call, comm_t comm) {
  if (result == ncclSuccess) return;
  throw nccl_error(std::string(call) + " failed: " + describe(result, comm), result, result_name(result));
}

}  // namespace gpumem::comm::nccl
