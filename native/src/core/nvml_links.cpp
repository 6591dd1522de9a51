// NVLink discovery through NVML, loaded with dlopen (see nvml_links.hpp). The few NVML declarations
// used are written out here at the ABI of nvml.h (no NVML header is needed to build): every function
// returns nvmlReturn_t (an int enum), device handles are opaque pointers, and nvmlPciInfo_t is the
// layout the _v2 functions fill (busIdLegacy[16], domain, bus, device, pciDeviceId, pciSubSystemId,
// busId[32]).
#include "nvml_links.hpp"

#include <dlfcn.h>

#include <algorithm>

namespace gpumem::detail {

namespace {

using nvmlReturn_t = int;
constexpr nvmlReturn_t NVML_SUCCESS = 0;
using nvmlDevice_t = struct nvmlDevice_st*;
using nvmlEnableState_t = int;  // NVML_FEATURE_DISABLED 0, NVML_FEATURE_ENABLED 1
constexpr nvmlEnableState_t NVML_FEATURE_ENABLED = 1;
using nvmlIntNvLinkDeviceType_t = int;  // GPU 0, IBMNPU 1, SWITCH 2, UNKNOWN 0xFF
constexpr nvmlIntNvLinkDeviceType_t NVML_NVLINK_DEVICE_TYPE_GPU = 0;
constexpr nvmlIntNvLinkDeviceType_t NVML_NVLINK_DEVICE_TYPE_SWITCH = 2;
// NVML_NVLINK_MAX_LINKS is 18 in current headers (6 and 12 in older ones); for a link the device
// does not have, NVML answers an error and the link is skipped.
constexpr unsigned max_links = 18;

struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
};
static_assert(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t as nvml.h lays it out");

struct nvml_api {
  nvmlReturn_t (*init)() = nullptr;                                                     // nvmlInit_v2
  nvmlReturn_t (*shutdown)() = nullptr;                                                 // nvmlShutdown
  nvmlReturn_t (*handle_by_bus_id)(const char*, nvmlDevice_t*) = nullptr;               // nvmlDeviceGetHandleByPciBusId_v2
  nvmlReturn_t (*link_state)(nvmlDevice_t, unsigned, nvmlEnableState_t*) = nullptr;     // nvmlDeviceGetNvLinkState
  nvmlReturn_t (*remote_pci)(nvmlDevice_t, unsigned, nvmlPciInfo_t*) = nullptr;         // nvmlDeviceGetNvLinkRemotePciInfo_v2
  nvmlReturn_t (*remote_type)(nvmlDevice_t, unsigned, nvmlIntNvLinkDeviceType_t*) = nullptr;  // optional
  const char* (*error_string)(nvmlReturn_t) = nullptr;                                  // nvmlErrorString
};

template <typename F>
bool bind(void* lib, const char* name, F& out, std::string& missing) {
  out = reinterpret_cast<F>(dlsym(lib, name));
  if (out == nullptr) missing += std::string(missing.empty() ? "" : ", ") + name;
  return out != nullptr;
}

std::string nvml_error(const nvml_api& api, nvmlReturn_t status) {
  const char* text = api.error_string != nullptr ? api.error_string(status) : nullptr;
  return (text != nullptr ? std::string(text) : "NVML error") + " (" + std::to_string(status) + ")";
}

// The loaded library and its functions; shut down (when initialised) and closed however the query ends.
struct library {
  void* handle = nullptr;
  nvml_api api;
  bool initialised = false;
  library() = default;
  library(const library&) = delete;
  library& operator=(const library&) = delete;
  ~library() {
    if (initialised) api.shutdown();
    if (handle != nullptr) dlclose(handle);
  }
};

}  // namespace

nvlink_counts count_nvlinks(const std::vector<pci_address>& devices) {
  nvlink_counts out;
  const std::size_t n = devices.size();
  out.links.assign(n, std::vector<int>(n, 0));
  out.device_failure.assign(n, "");
  library lib;
  lib.handle = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib.handle == nullptr) {
    const char* why = dlerror();
    out.failure = std::string("NVML (libnvidia-ml.so.1) cannot be loaded: ") + (why != nullptr ? why : "dlopen failed");
    return out;
  }
  nvml_api& api = lib.api;
  std::string missing;
  bind(lib.handle, "nvmlInit_v2", api.init, missing);
  bind(lib.handle, "nvmlShutdown", api.shutdown, missing);
  bind(lib.handle, "nvmlDeviceGetHandleByPciBusId_v2", api.handle_by_bus_id, missing);
  bind(lib.handle, "nvmlDeviceGetNvLinkState", api.link_state, missing);
  bind(lib.handle, "nvmlDeviceGetNvLinkRemotePciInfo_v2", api.remote_pci, missing);
  bind(lib.handle, "nvmlErrorString", api.error_string, missing);
  if (!missing.empty()) {
    out.failure = "NVML (libnvidia-ml.so.1) lacks " + missing;
    return out;
  }
  std::string optional;
  bind(lib.handle, "nvmlDeviceGetNvLinkRemoteDeviceType", api.remote_type, optional);  // older drivers: match by bus id only
  const nvmlReturn_t init = api.init();
  if (init != NVML_SUCCESS) {
    out.failure = "nvmlInit_v2 failed: " + nvml_error(api, init);
    return out;
  }
  lib.initialised = true;

  std::vector<int> switch_links(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    nvmlDevice_t handle = nullptr;
    const nvmlReturn_t found = api.handle_by_bus_id(devices[i].text.c_str(), &handle);
    if (found != NVML_SUCCESS) {
      out.device_failure[i] = "nvmlDeviceGetHandleByPciBusId_v2(" + devices[i].text + ") failed: " + nvml_error(api, found);
      continue;
    }
    for (unsigned link = 0; link < max_links; ++link) {
      nvmlEnableState_t active = 0;
      if (api.link_state(handle, link, &active) != NVML_SUCCESS) continue;  // no such link, or no NVLink at all
      if (active != NVML_FEATURE_ENABLED) continue;
      nvmlIntNvLinkDeviceType_t type = NVML_NVLINK_DEVICE_TYPE_GPU;
      if (api.remote_type != nullptr && api.remote_type(handle, link, &type) != NVML_SUCCESS) continue;
      if (type == NVML_NVLINK_DEVICE_TYPE_SWITCH) {
        ++switch_links[i];
        continue;
      }
      if (type != NVML_NVLINK_DEVICE_TYPE_GPU) continue;
      nvmlPciInfo_t remote{};
      if (api.remote_pci(handle, link, &remote) != NVML_SUCCESS) continue;
      for (std::size_t j = 0; j < n; ++j) {
        if (j != i && devices[j].domain == remote.domain && devices[j].bus == remote.bus &&
            devices[j].device == remote.device) {
          ++out.links[i][j];
        }
      }
    }
  }
  // NVSwitch systems: every GPU's links go to the switches, which connect all GPUs.
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      if (i != j) out.links[i][j] += std::min(switch_links[i], switch_links[j]);
    }
  }
  return out;
}

}  // namespace gpumem::detail
