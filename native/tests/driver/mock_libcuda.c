/* A stand-in for libcuda.so.1 on a machine without an NVIDIA driver, for the CPU tests of gpumem's
 * driver layer and of fake_cuda.c (bindings/python/tests/test_driver.py):
 *
 *   cc -shared -fPIC -o libmock_cuda.so native/tests/driver/mock_libcuda.c
 *   GPUMEM_CUDA_DRIVER=libfake_cuda.so GPUMEM_FAKE_DRIVER_REAL=$PWD/libmock_cuda.so ...
 *
 * A CUDA 13.0 driver with no device: cuInit succeeds, cuDeviceGetCount says 0, cuGetProcAddress
 * hands out every entry point (one that answers CUDA_ERROR_NO_DEVICE, or the error names), so that
 * what the tests see is what the interposer and gpumem's table make of the versions. */
#include <stddef.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long cuuint64_t;
enum { CUDA_SUCCESS = 0, CUDA_ERROR_NO_DEVICE = 100 };

#define EXPORT __attribute__((visibility("default")))

static CUresult no_device(void) { return CUDA_ERROR_NO_DEVICE; }
static CUresult device_count(int* count) {
  *count = 0;
  return CUDA_SUCCESS;
}
static CUresult error_name(CUresult status, const char** name) {
  *name = status == CUDA_SUCCESS ? "CUDA_SUCCESS" : status == CUDA_ERROR_NO_DEVICE ? "CUDA_ERROR_NO_DEVICE" : "CUDA_ERROR_UNKNOWN";
  return CUDA_SUCCESS;
}
static CUresult error_string(CUresult status, const char** text) {
  *text = status == CUDA_SUCCESS ? "no error" : status == CUDA_ERROR_NO_DEVICE ? "no CUDA-capable device is detected" : "unknown error";
  return CUDA_SUCCESS;
}

EXPORT CUresult cuInit(unsigned int flags) {
  (void)flags;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuDriverGetVersion(int* version) {
  *version = 13000;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags, int* status) {
  (void)version;
  (void)flags;
  if (strcmp(symbol, "cuDeviceGetCount") == 0) *pfn = (void*)&device_count;
  else if (strcmp(symbol, "cuGetErrorName") == 0) *pfn = (void*)&error_name;
  else if (strcmp(symbol, "cuGetErrorString") == 0) *pfn = (void*)&error_string;
  else if (strcmp(symbol, "cuDriverGetVersion") == 0) *pfn = (void*)&cuDriverGetVersion;
  else if (strcmp(symbol, "cuInit") == 0) *pfn = (void*)&cuInit;
  else *pfn = (void*)&no_device;
  if (status != NULL) *status = 0;
  return CUDA_SUCCESS;
}

EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  return cuGetProcAddress_v2(symbol, pfn, version, flags, NULL);
}
