// Peer access checks and cudaDeviceEnablePeerAccess (see gpumem/peer_access.hpp).
#include "gpumem/peer_access.hpp"

#include <string>

#include "gpumem/device.hpp"
#include "gpumem/errors.hpp"
#include "cuda_check.hpp"

namespace gpumem {

namespace {

[[noreturn]] void reject(const std::string& message) {
  throw invalid_argument(invalid_argument::kind::range, "peerAccess", message);
}

std::string id(int device) { return "cuda:" + std::to_string(device); }

}  // namespace

#ifdef GPUMEM_WITH_CUDA

bool can_access_peer(int accessor, int owner) noexcept {
  if (accessor == owner || accessor < 0 || owner < 0) return false;
  int can = 0;
  if (detail::cu::DeviceCanAccessPeer(&can, accessor, owner) != CUDA_SUCCESS) {
    return false;
  }
  return can != 0;
}

void enable_peer_access(int device, const std::vector<int>& peers) {
  for (int peer : peers) {
    detail::device_scope scope(peer);
    const CUresult status = detail::cu::DeviceEnablePeerAccess(device, 0);
    if (status == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) {
      continue;
    }
    detail::check_cuda(status, ("cudaDeviceEnablePeerAccess(" + id(peer) + " -> " + id(device) + ")").c_str());
  }
}

#else

bool can_access_peer(int, int) noexcept { return false; }

void enable_peer_access(int, const std::vector<int>& peers) {
  if (!peers.empty()) throw invalid_state("peerAccess: gpumem was built without CUDA");
}

#endif

void check_peer_access(int device, const std::vector<int>& peers) {
  if (peers.empty()) return;
  // In the order of the TypeScript check (peer-access.ts), so that both name the same problem.
  for (std::size_t i = 0; i < peers.size(); ++i) {
    const int peer = peers[i];
    if (peer < 0) {
      reject("Expected non-negative integer for peerAccess[" + std::to_string(i) + "] but received " +
             std::to_string(peer) + " of type number");
    }
    for (std::size_t k = 0; k < i; ++k) {
      if (peers[k] == peer) reject("Expected distinct devices for peerAccess but " + id(peer) + " is listed twice");
    }
  }
  for (std::size_t i = 0; i < peers.size(); ++i) {
    if (peers[i] == device) {
      reject("Expected devices other than the memory's own (" + id(device) + ") for peerAccess but received " +
             std::to_string(peers[i]) + " at peerAccess[" + std::to_string(i) + "]");
    }
  }
  const int count = device_count();
  for (std::size_t i = 0; i < peers.size(); ++i) {
    if (peers[i] >= count) {
      reject("Expected CUDA device ordinals below the device count (" + std::to_string(count) +
             ") for peerAccess but received " + std::to_string(peers[i]) + " at peerAccess[" + std::to_string(i) + "]");
    }
  }
  for (int peer : peers) {
    if (!can_access_peer(peer, device)) {
      reject("Expected devices that can access " + id(device) + "'s memory for peerAccess but " + id(peer) +
             " cannot (no P2P path between them)");
    }
  }
}

}  // namespace gpumem
