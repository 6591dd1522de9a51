// NCCL, loaded at run time (dlopen) rather than linked: the build needs no NCCL headers or
// libraries, and the addon loads where NCCL is missing (ncclLibrary() then says why). The library
// is GPUMEM_NCCL_LIB when set, else libnccl.so.2 from the loader's search path. Declares the few
// types and functions the communicator uses, with NCCL's own ABI (nccl.h): C enums are ints,
// ncclUniqueId is a 128-byte struct passed by value, ncclComm_t and cudaStream_t are pointers.
#pragma once
#include <cstddef>
#include <string>

namespace gpumem::comm::nccl {

constexpr std::size_t unique_id_bytes = 128;  // NCCL_UNIQUE_ID_BYTES
struct unique_id {
  char internal[unique_id_bytes];
};
using comm_t = struct opaque_nccl_comm*;  // ncclComm_t
using result_t = int;                     // ncclResult_t

// ncclResult_t values, as nccl.h names them.
enum : result_t {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclTimeout = 8,
};
constexpr int ncclFloat32 = 7;  // ncclDataType_t
constexpr int ncclSum = 0;      // ncclRedOp_t

struct functions {
  result_t (*get_version)(int*) = nullptr;
  result_t (*get_unique_id)(unique_id*) = nullptr;
  result_t (*comm_init_rank)(comm_t*, int, unique_id, int) = nullptr;
  result_t (*all_reduce)(const void*, void*, std::size_t, int, int, comm_t, void*) = nullptr;
  result_t (*all_gather)(const void*, void*, std::size_t, int, comm_t, void*) = nullptr;
  result_t (*broadcast)(const void*, void*, std::size_t, int, int, comm_t, void*) = nullptr;
  result_t (*comm_abort)(comm_t) = nullptr;
  result_t (*comm_destroy)(comm_t) = nullptr;
  result_t (*comm_get_async_error)(comm_t, result_t*) = nullptr;
  const char* (*get_error_string)(result_t) = nullptr;
  const char* (*get_last_error)(comm_t) = nullptr;  // optional (NCCL 2.13 and later)
};

struct load_status {
  bool loaded = false;
  std::string path;   // the file tried (GPUMEM_NCCL_LIB or libnccl.so.2)
  int version = 0;    // ncclGetVersion's code, e.g. 22703 for 2.27.3
  std::string error;  // why it did not load
};

// Loads NCCL. Until a load succeeds every call tries again (so a changed GPUMEM_NCCL_LIB is
// honoured); once one has, that library stays for the process's life. Never throws.
load_status status();
// NCCL's functions; throws invalid_state with status().error when it cannot be loaded.
const functions& api();
// "ncclInvalidArgument: invalid argument (run with NCCL_DEBUG=WARN for details)", with NCCL's
// last error text for `comm` where the library has ncclGetLastError.
std::string describe(result_t result, comm_t comm = nullptr);
const char* result_name(result_t result);
// Throws nccl_error "<call> failed: <describe(result)>" unless result is success.
void check(result_t result, const char* call, comm_t comm = nullptr);

}  // namespace gpumem::comm::nccl
