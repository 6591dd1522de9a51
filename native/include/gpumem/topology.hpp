// The peer topology of the visible CUDA devices: for every ordered pair, whether one can access the
// other's memory directly, the runtime's P2P attributes, and the link between them (NVLink with its
// number of active links, PCIe, or unknown where NVML cannot be asked).
#pragma once
#include <string>
#include <vector>

namespace gpumem {

// How two devices are connected.
enum class peer_link_kind { nvlink, pcie, unknown };
const char* peer_link_name(peer_link_kind kind) noexcept;  // "nvlink", "pcie", "unknown"

// Device `from` accessing memory on device `to`.
struct peer_pair {
  int from = 0;
  int to = 0;
  bool can_access_peer = false;     // cudaDeviceCanAccessPeer(from, to)
  int performance_rank = 0;         // cudaDevP2PAttrPerformanceRank (lower is faster)
  bool access_supported = false;    // cudaDevP2PAttrAccessSupported
  bool native_atomics = false;      // cudaDevP2PAttrNativeAtomicSupported
  peer_link_kind link = peer_link_kind::unknown;
  int nvlinks = 0;                  // active NVLinks between the two (0 unless link is nvlink)
  std::string link_reason;          // why link is unknown (empty otherwise)
};

struct peer_topology {
  int device_count = 0;
  std::vector<std::string> pci_bus_ids;  // per device, from cudaDeviceGetPCIBusId ("0000:3B:00.0")
  std::vector<peer_pair> pairs;          // every (from, to) with from != to, from-major order
  std::string nvml_status;               // empty when NVML answered; else why links are unknown
};

// The topology of the visible devices. Never throws: a machine without devices (or a build without
// CUDA) gives device_count 0 and no pairs; a failing runtime query leaves its fields false/0.
peer_topology get_peer_topology() noexcept;

}  // namespace gpumem
