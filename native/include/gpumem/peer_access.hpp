// Peer access: which other devices may read and write the memory of an allocator on one device
// (the `peerAccess` option of the GPU strategies). The check is the same for every strategy and
// throws invalid_argument naming the option; how access is granted is each strategy's own
// (cudaDeviceEnablePeerAccess for cudaMalloc memory here; cudaMemPoolSetAccess and cuMemSetAccess
// in the async and VMM resources).
#pragma once
#include <vector>

namespace gpumem {

// Whether `accessor` can read and write memory on `owner` directly (cudaDeviceCanAccessPeer);
// false for the same device, a bad ordinal, or a build without CUDA. Never throws.
bool can_access_peer(int accessor, int owner) noexcept;

// Checks a peerAccess list for memory on `device`: distinct non-negative ordinals, none equal to
// `device`, each below device_count(), each able to access `device`'s memory. Throws
// invalid_argument (argument "peerAccess") with the message the TypeScript check gives.
void check_peer_access(int device, const std::vector<int>& peers);

// Lets each peer's context access the cudaMalloc memory of `device` (cudaDeviceEnablePeerAccess
// from the peer to `device`; access that is already enabled is fine). Peer access is per context
// and device pair, so it covers every allocation on `device`, present and future; it is never
// disabled. Throws cuda_error when the driver refuses.
void enable_peer_access(int device, const std::vector<int>& peers);

}  // namespace gpumem
