/* A CUDA driver that says it is older than it is, for testing gpumem on older drivers on a new
 * one. Loaded by gpumem in place of libcuda.so.1:
 *
 *   cc -shared -fPIC -O2 -o libfake_cuda.so native/tests/driver/fake_cuda.c -ldl
 *   GPUMEM_CUDA_DRIVER=$PWD/libfake_cuda.so GPUMEM_FAKE_DRIVER_VERSION=12000 python3 ...
 *
 * It opens the real libcuda.so.1 (GPUMEM_FAKE_DRIVER_REAL names another) and forwards to it, but
 * cuDriverGetVersion reports GPUMEM_FAKE_DRIVER_VERSION (e.g. 12000, 12040, 12080), and
 * cuGetProcAddress clamps the requested CUDA version to it (so the forms newer than that version
 * are not handed out) and answers "not found" for the entry points introduced after it (the table
 * below). gpumem's driver layer takes only cuGetProcAddress(_v2), cuInit and cuDriverGetVersion
 * with dlsym and everything else through cuGetProcAddress, so these four are all it exports.
 * PyTorch keeps the real driver: its runtime opens libcuda.so.1 itself.
 *
 * No CUDA header: cuda.h renames cuGetProcAddress to cuGetProcAddress_v2 with macros. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long cuuint64_t;
enum { CUDA_SUCCESS = 0, CUDA_ERROR_NOT_INITIALIZED = 3, CUDA_ERROR_NOT_FOUND = 500 };
enum { SYMBOL_SUCCESS = 0, SYMBOL_NOT_FOUND = 1, VERSION_NOT_SUFFICIENT = 2 };  /* CUdriverProcAddressQueryResult */

typedef CUresult (*proc_v2_fn)(const char*, void**, int, cuuint64_t, int*);
typedef CUresult (*proc_v1_fn)(const char*, void**, int, cuuint64_t);
typedef CUresult (*init_fn)(unsigned int);
typedef CUresult (*version_fn)(int*);

/* The entry points gpumem asks for and the CUDA version that introduced each: the lowest
 * PFN_<name>_v<version> of the toolkit's cudaTypedefs.h (e.g. PFN_cuMemCreate_v10020). Their newer
 * forms (PFN_cuMemAdvise_v12020 and PFN_cuMemPrefetchAsync_v12020 with a CUmemLocation,
 * PFN_cuEventElapsedTime_v12080, PFN_cuCtxSynchronize_v13000) the real driver picks by the clamped
 * version. */
static const struct {
  const char* name;
  int version;
} introduced[] = {
    {"cuGetErrorName", 6000},          {"cuGetErrorString", 6000},
    {"cuDeviceGet", 2000},             {"cuDeviceGetCount", 2000},
    {"cuDeviceGetAttribute", 2000},    {"cuDeviceGetName", 2000},
    {"cuDeviceTotalMem", 2000},        {"cuDeviceGetPCIBusId", 4010},
    {"cuDeviceCanAccessPeer", 4000},   {"cuDeviceGetP2PAttribute", 8000},
    {"cuDevicePrimaryCtxRetain", 7000}, {"cuCtxGetCurrent", 4000},
    {"cuCtxSetCurrent", 4000},         {"cuCtxGetDevice", 2000},
    {"cuCtxSynchronize", 2000},        {"cuCtxEnablePeerAccess", 4000},
    {"cuMemGetInfo", 2000},            {"cuMemAlloc", 2000},
    {"cuMemFree", 2000},               {"cuMemAllocManaged", 6000},
    {"cuMemAdvise", 8000},             {"cuMemPrefetchAsync", 8000},
    {"cuMemHostAlloc", 2020},          {"cuMemFreeHost", 2000},
    {"cuMemHostGetDevicePointer", 2020}, {"cuMemHostRegister", 4000},
    {"cuMemHostUnregister", 4000},     {"cuMemcpyAsync", 4000},
    {"cuStreamCreate", 2000},          {"cuStreamDestroy", 2000},
    {"cuStreamSynchronize", 2000},     {"cuStreamWaitEvent", 3020},
    {"cuStreamBeginCapture", 10000},   {"cuStreamEndCapture", 10000},
    {"cuGraphInstantiateWithFlags", 11040}, {"cuGraphLaunch", 10000},
    {"cuGraphExecDestroy", 10000},     {"cuGraphDestroy", 10000},
    {"cuEventCreate", 2000},           {"cuEventRecord", 2000},
    {"cuEventQuery", 2000},            {"cuEventSynchronize", 2000},
    {"cuEventDestroy", 2000},          {"cuEventElapsedTime", 2000},
    {"cuMemPoolCreate", 11020},        {"cuMemPoolDestroy", 11020},
    {"cuMemPoolSetAttribute", 11020},  {"cuMemPoolGetAttribute", 11020},
    {"cuMemPoolSetAccess", 11020},     {"cuMemPoolTrimTo", 11020},
    {"cuMemAllocFromPoolAsync", 11020}, {"cuMemFreeAsync", 11020},
    {"cuMemGetAllocationGranularity", 10020}, {"cuMemAddressReserve", 10020},
    {"cuMemAddressFree", 10020},       {"cuMemCreate", 10020},
    {"cuMemRelease", 10020},           {"cuMemMap", 10020},
    {"cuMemUnmap", 10020},             {"cuMemSetAccess", 10020},
};

static pthread_once_t once = PTHREAD_ONCE_INIT;
static proc_v2_fn real_v2;
static proc_v1_fn real_v1;
static init_fn real_init;
static version_fn real_version;
static int fake_version;

static void load(void) {
  const char* path = getenv("GPUMEM_FAKE_DRIVER_REAL");
  void* lib = dlopen(path != NULL && *path != '\0' ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  const char* v = getenv("GPUMEM_FAKE_DRIVER_VERSION");
  fake_version = v != NULL ? atoi(v) : 12000;
  if (lib == NULL) {
    fprintf(stderr, "fake_cuda: cannot open the real driver: %s\n", dlerror());
    return;
  }
  real_v2 = (proc_v2_fn)dlsym(lib, "cuGetProcAddress_v2");
  real_v1 = (proc_v1_fn)dlsym(lib, "cuGetProcAddress");
  real_init = (init_fn)dlsym(lib, "cuInit");
  real_version = (version_fn)dlsym(lib, "cuDriverGetVersion");
}

static int introduced_in(const char* symbol) {
  for (size_t i = 0; i < sizeof introduced / sizeof introduced[0]; ++i) {
    if (strcmp(introduced[i].name, symbol) == 0) return introduced[i].version;
  }
  return 0;  /* not in the table: forwarded at the clamped version */
}

__attribute__((visibility("default"))) CUresult cuInit(unsigned int flags) {
  pthread_once(&once, load);
  return real_init != NULL ? real_init(flags) : CUDA_ERROR_NOT_INITIALIZED;
}

__attribute__((visibility("default"))) CUresult cuDriverGetVersion(int* version) {
  pthread_once(&once, load);
  if (real_version == NULL) return CUDA_ERROR_NOT_INITIALIZED;
  int real = 0;
  const CUresult status = real_version(&real);
  if (status == CUDA_SUCCESS) *version = fake_version < real ? fake_version : real;
  return status;
}

CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags);

__attribute__((visibility("default"))) CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version,
                                                                    cuuint64_t flags, int* symbol_status) {
  pthread_once(&once, load);
  int ignored = 0;
  if (symbol_status == NULL) symbol_status = &ignored;
  *pfn = NULL;
  /* This driver's own answers, not the real one's. */
  if (strcmp(symbol, "cuDriverGetVersion") == 0) *pfn = (void*)&cuDriverGetVersion;
  if (strcmp(symbol, "cuInit") == 0) *pfn = (void*)&cuInit;
  if (strcmp(symbol, "cuGetProcAddress") == 0) {
    *pfn = cuda_version >= 12000 ? (void*)&cuGetProcAddress_v2 : (void*)&cuGetProcAddress;
  }
  if (*pfn != NULL) {
    *symbol_status = SYMBOL_SUCCESS;
    return CUDA_SUCCESS;
  }
  const int clamped = cuda_version < fake_version ? cuda_version : fake_version;
  if (introduced_in(symbol) > clamped) {
    *symbol_status = introduced_in(symbol) > fake_version ? SYMBOL_NOT_FOUND : VERSION_NOT_SUFFICIENT;
    return CUDA_ERROR_NOT_FOUND;
  }
  if (real_v2 != NULL) return real_v2(symbol, pfn, clamped, flags, symbol_status);
  if (real_v1 == NULL) return CUDA_ERROR_NOT_INITIALIZED;
  const CUresult status = real_v1(symbol, pfn, clamped, flags);
  *symbol_status = status == CUDA_SUCCESS ? SYMBOL_SUCCESS : SYMBOL_NOT_FOUND;
  return status;
}

__attribute__((visibility("default"))) CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version,
                                                                 cuuint64_t flags) {
  return cuGetProcAddress_v2(symbol, pfn, cuda_version, flags, NULL);
}
