// cuBLAS through dlopen: see cublas_loader.hpp.
#ifdef GPUMEM_WITH_CUDA
#include "cublas_loader.hpp"

#include <dlfcn.h>

#include <map>
#include <optional>
#include <mutex>
#include <unordered_map>

#include "core/cuda_runtime_check.hpp"
#include "gpumem/errors.hpp"
#include "workspace.hpp"

namespace gpumem::ops::cublas {
namespace {

// cuBLAS's ABI: cublasHandle_t is a pointer to an opaque struct, cublasStatus_t an int.
using handle_t = struct opaque_cublas_context*;
using status_t = int;
using create_fn = status_t (*)(handle_t*);
using destroy_fn = status_t (*)(handle_t);
using set_stream_fn = status_t (*)(handle_t, cudaStream_t);
using set_workspace_fn = status_t (*)(handle_t, void*, std::size_t);
using sgemm_fn = status_t (*)(handle_t, int, int, int, int, int, const float*, const float*, int, const float*, int,
                              const float*, float*, int);
using sgemm_strided_batched_fn = status_t (*)(handle_t, int, int, int, int, int, const float*, const float*, int,
                                              long long, const float*, int, long long, const float*, float*, int,
                                              long long, int);

// The functions used, all null until a library that has the required ones is loaded.
struct entry_points {
  create_fn create = nullptr;
  destroy_fn destroy = nullptr;
  set_stream_fn set_stream = nullptr;
  set_workspace_fn set_workspace = nullptr;  // optional (cuBLAS 11.4 and later)
  sgemm_fn sgemm = nullptr;
  sgemm_strided_batched_fn sgemm_strided_batched = nullptr;  // optional (every cuBLAS since 8.0 has it)
};

struct library : entry_points {
  load_status status;
  std::mutex mutex;  // guards handles and each set_stream + sgemm pair
  struct device_handle {
    handle_t handle = nullptr;
    // The fallback workspaces of streams with none bound, one per stream: a workspace is used by
    // kernels after the call returns, so two streams running products at once must not share one.
    std::unordered_map<cudaStream_t, void*> workspaces;
    cudaStream_t stream = nullptr;
    void* workspace = nullptr;  // the workspace the handle was last given
    bool stream_set = false;
  };
  std::map<int, device_handle> handles;  // one per device, created lazily, kept for the process's life
};

library& lib() {
  static library l;
  return l;
}

const char* status_name(status_t s) {
  switch (s) {
    case 0: return "CUBLAS_STATUS_SUCCESS";
    case 1: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case 3: return "CUBLAS_STATUS_ALLOC_FAILED";
    case 7: return "CUBLAS_STATUS_INVALID_VALUE";
    case 8: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case 11: return "CUBLAS_STATUS_MAPPING_ERROR";
    case 13: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case 14: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case 15: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case 16: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "CUBLAS_STATUS_UNKNOWN";
  }
}

void check(status_t s, const char* what) {
  if (s == 0) return;
  throw cuda_error(std::string(what) + " failed: " + status_name(s) + " (" + std::to_string(s) + ")", s,
                   status_name(s));
}

void do_load(library& l) {
  static const char* const candidates[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so"};
  std::string errors;
  for (const char* name : candidates) {
    void* h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      const char* e = dlerror();
      errors += std::string(errors.empty() ? "" : "; ") + (e != nullptr ? e : name);
      continue;
    }
    entry_points f;
    f.create = reinterpret_cast<create_fn>(dlsym(h, "cublasCreate_v2"));
    f.destroy = reinterpret_cast<destroy_fn>(dlsym(h, "cublasDestroy_v2"));
    f.set_stream = reinterpret_cast<set_stream_fn>(dlsym(h, "cublasSetStream_v2"));
    f.sgemm = reinterpret_cast<sgemm_fn>(dlsym(h, "cublasSgemm_v2"));
    f.set_workspace = reinterpret_cast<set_workspace_fn>(dlsym(h, "cublasSetWorkspace_v2"));
    f.sgemm_strided_batched = reinterpret_cast<sgemm_strided_batched_fn>(dlsym(h, "cublasSgemmStridedBatched"));
    if (f.create == nullptr || f.set_stream == nullptr || f.sgemm == nullptr) {
      errors += std::string(errors.empty() ? "" : "; ") + name + ": missing cublasCreate_v2/cublasSetStream_v2/cublasSgemm_v2";
      dlclose(h);
      continue;
    }
    static_cast<entry_points&>(l) = f;
    l.status.loaded = true;
    l.status.library = name;
    return;  // the library stays loaded for the process's life
  }
  l.status.error = errors;
}

// The device a stream belongs to. cudaStreamGetDevice is refused while the stream is being
// captured into a CUDA Graph, and a refused call invalidates the capture, so each stream's device
// is remembered when it is first seen (work runs eagerly before it is captured) and looked up
// while the stream is capturing.
int device_of(cudaStream_t stream) {
  int device = 0;
#if defined(CUDART_VERSION) && CUDART_VERSION >= 12080
  if (stream != nullptr) {
    static std::mutex mutex;
    static std::unordered_map<cudaStream_t, int> known;
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    detail::check_cuda(cudaStreamIsCapturing(stream, &capture), "cudaStreamIsCapturing");
    std::lock_guard<std::mutex> lock(mutex);
    if (capture == cudaStreamCaptureStatusNone) {
      detail::check_cuda(cudaStreamGetDevice(stream, &device), "cudaStreamGetDevice");
      known[stream] = device;
      return device;
    }
    if (auto it = known.find(stream); it != known.end()) return it->second;
  }
#endif
  detail::check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  return device;
}

}  // namespace

const load_status& load() {
  static std::once_flag once;
  library& l = lib();
  std::call_once(once, [&] { do_load(l); });
  return l.status;
}

namespace {

// Runs call(handle) with the device's handle set to `stream` and its workspace, under the library's
// mutex (another thread must not change the handle's stream between the set and the call).
template <class F>
void with_handle(cudaStream_t stream, F&& call) {
  if (!load().loaded) throw invalid_state("cuBLAS is not loaded: " + load().error);
  library& l = lib();
  const int device = device_of(stream);
  const std::optional<workspace::binding> bound = workspace::find(stream);
  std::lock_guard<std::mutex> lock(l.mutex);
  library::device_handle& d = l.handles[device];
  if (d.handle == nullptr) {
    detail::device_scope scope(device);  // cublasCreate binds the handle to the current device
    check(l.create(&d.handle), "cublasCreate_v2");
  }
  // Default math mode: full FP32 (no TF32), default pointer mode: host scalars. cublasSetStream
  // resets the workspace to cuBLAS's own pool, which allocates as it goes (a CUDA Graph capture
  // does not allow that), so it is called only when the stream changes, and the stream's workspace
  // is attached again whenever the stream or its workspace changed.
  if (!d.stream_set || d.stream != stream) {
    check(l.set_stream(d.handle, stream), "cublasSetStream_v2");
    d.stream = stream;
    d.stream_set = true;
    d.workspace = nullptr;
  }
  if (l.set_workspace != nullptr) {
    void* workspace = nullptr;
    std::size_t workspace_bytes = blas_workspace_bytes;
    if (bound && bound->blas_bytes > 0) {
      workspace = bound->blas;
      workspace_bytes = bound->blas_bytes;
    } else {
      void*& fallback = d.workspaces[stream];
      if (fallback == nullptr) {
        detail::device_scope scope(device);
        detail::check_cuda(cudaMalloc(&fallback, workspace_bytes), "cudaMalloc (cuBLAS workspace)");
        workspace::count_unbound_allocation();
      }
      workspace = fallback;
    }
    if (workspace != d.workspace) {
      check(l.set_workspace(d.handle, workspace, workspace_bytes), "cublasSetWorkspace_v2");
      d.workspace = workspace;
    }
  }
  call(d.handle);
}

}  // namespace

void sgemm(cudaStream_t stream, operation transa, operation transb, int m, int n, int k, float alpha, const float* A,
           int lda, const float* B, int ldb, float beta, float* C, int ldc) {
  with_handle(stream, [&](handle_t handle) {
    check(lib().sgemm(handle, transa, transb, m, n, k, &alpha, A, lda, B, ldb, &beta, C, ldc), "cublasSgemm_v2");
  });
}

bool has_sgemm_strided_batched() { return load().loaded && lib().sgemm_strided_batched != nullptr; }

void sgemm_strided_batched(cudaStream_t stream, operation transa, operation transb, int m, int n, int k, float alpha,
                           const float* A, int lda, long long stride_a, const float* B, int ldb, long long stride_b,
                           float beta, float* C, int ldc, long long stride_c, int batch) {
  if (load().loaded && !has_sgemm_strided_batched())
    throw invalid_state("cuBLAS " + load().library + " has no cublasSgemmStridedBatched");
  with_handle(stream, [&](handle_t handle) {
    check(lib().sgemm_strided_batched(handle, transa, transb, m, n, k, &alpha, A, lda, stride_a, B, ldb, stride_b,
                                      &beta, C, ldc, stride_c, batch),
          "cublasSgemmStridedBatched");
  });
}

void forget_stream(cudaStream_t stream) {
  if (!load().loaded) return;
  library& l = lib();
  std::lock_guard<std::mutex> lock(l.mutex);
  for (auto& [device, d] : l.handles) {
    if (d.handle == nullptr || !d.stream_set || d.stream != stream) continue;
    // Back to the legacy default stream, which also drops the workspace (cuBLAS's own pool from
    // now on); a failure leaves the handle marked unset, so the next sgemm sets both again.
    l.set_stream(d.handle, nullptr);
    d.stream_set = false;
    d.workspace = nullptr;
  }
}

}  // namespace gpumem::ops::cublas
#endif
