// NVLink counts between GPUs, from NVML loaded at run time (dlopen of libnvidia-ml.so.1, so that the
// addon neither links nor needs it). A private header of the topology query.
#pragma once
#include <string>
#include <vector>

namespace gpumem::detail {

// A device's PCI address, as cudaDeviceGetPCIBusId gives it ("0000:3b:00.0"), parsed.
struct pci_address {
  unsigned domain = 0;
  unsigned bus = 0;
  unsigned device = 0;
  std::string text;  // as given, for NVML's lookup by bus id
};

struct nvlink_counts {
  // Empty when NVML answered; else why no link is known ("libnvidia-ml.so.1 cannot be loaded: ...").
  std::string failure;
  // links[i][j]: active NVLinks between devices i and j (0: none, the devices talk over PCIe).
  // Links to an NVSwitch count for every pair of devices that both reach the switch fabric: the
  // smaller of the two devices' switch links.
  std::vector<std::vector<int>> links;
  // Per device: why its links are unknown although NVML loaded (e.g. no NVML handle for its bus id).
  std::vector<std::string> device_failure;
};

// The NVLink counts between the given devices (in CUDA ordinal order). Never throws.
nvlink_counts count_nvlinks(const std::vector<pci_address>& devices);

}  // namespace gpumem::detail
