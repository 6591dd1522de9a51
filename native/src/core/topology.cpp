// The peer topology query (see gpumem/topology.hpp): P2P facts from the CUDA runtime, links from NVML.
#include "gpumem/topology.hpp"

#include <algorithm>
#include <cstdio>

#include "gpumem/device.hpp"
#include "cuda_check.hpp"
#include "nvml_links.hpp"

namespace gpumem {

const char* peer_link_name(peer_link_kind kind) noexcept {
  switch (kind) {
    case peer_link_kind::nvlink: return "nvlink";
    case peer_link_kind::pcie: return "pcie";
    case peer_link_kind::unknown: return "unknown";
  }
  return "unknown";
}

#ifdef GPUMEM_WITH_CUDA

namespace {

int p2p_attribute(cudaDeviceP2PAttr attr, int from, int to) {
  int value = 0;
  if (detail::cu::DeviceGetP2PAttribute(&value, attr, from, to) != CUDA_SUCCESS) {
    return 0;
  }
  return value;
}

detail::pci_address pci_address_of(int device) {
  detail::pci_address a;
  char id[32] = {};
  if (detail::cu::DeviceGetPCIBusId(id, sizeof id, device) != CUDA_SUCCESS) {
    return a;
  }
  a.text = id;
  unsigned function = 0;
  if (std::sscanf(id, "%x:%x:%x.%x", &a.domain, &a.bus, &a.device, &function) != 4) a.domain = a.bus = a.device = 0;
  return a;
}

}  // namespace

peer_topology get_peer_topology() noexcept {
  peer_topology t;
  try {
    t.device_count = device_count();
    const int n = t.device_count;
    std::vector<detail::pci_address> addresses;
    for (int d = 0; d < n; ++d) {
      addresses.push_back(pci_address_of(d));
      t.pci_bus_ids.push_back(addresses.back().text);
    }
    if (n < 2) return t;
    const detail::nvlink_counts links = detail::count_nvlinks(addresses);
    t.nvml_status = links.failure;
    for (int from = 0; from < n; ++from) {
      for (int to = 0; to < n; ++to) {
        if (from == to) continue;
        peer_pair p;
        p.from = from;
        p.to = to;
        int can = 0;
        (void)detail::cu::DeviceCanAccessPeer(&can, from, to);
        p.can_access_peer = can != 0;
        p.performance_rank = p2p_attribute(cudaDevP2PAttrPerformanceRank, from, to);
        p.access_supported = p2p_attribute(cudaDevP2PAttrAccessSupported, from, to) != 0;
        p.native_atomics = p2p_attribute(cudaDevP2PAttrNativeAtomicSupported, from, to) != 0;
        if (!links.failure.empty()) {
          p.link_reason = links.failure;
        } else if (!links.device_failure[from].empty() || !links.device_failure[to].empty()) {
          p.link_reason = !links.device_failure[from].empty() ? links.device_failure[from] : links.device_failure[to];
        } else {
          // Links are counted from each end; either count is the pair's (they agree where both are read).
          p.nvlinks = std::max(links.links[from][to], links.links[to][from]);
          p.link = p.nvlinks > 0 ? peer_link_kind::nvlink : peer_link_kind::pcie;
        }
        t.pairs.push_back(std::move(p));
      }
    }
  } catch (...) {
    // Only allocation can throw above; whatever was gathered is returned.
  }
  return t;
}

#else

peer_topology get_peer_topology() noexcept { return {}; }

#endif

}  // namespace gpumem
