// What the sleep exports (sleep_exports.cpp) need of the allocator instances (gpumem_torch.cpp): the
// instance's strategy and the sleeping leaf of one device's chain.
#pragma once
#include "gpumem/sleep.hpp"
#include "gpumem/strategy_registry.hpp"

namespace gpumem::torch {

struct sleep_target {
  const gpumem::strategy_descriptor* strategy = nullptr;  // the instance's strategy
  gpumem::sleepable* sleeper = nullptr;  // the device's leaf; nullptr while nothing was allocated there
};

// Instance `k` (0: the environment's, configured on the way) on `device` (-1: host memory).
// Returns GPUMEM_TORCH_OK with `out` set, or an error code with gpumem_last_error's message set: an
// instance never created, a bad configuration, a device out of range.
int find_sleep_target(int k, int device, sleep_target& out) noexcept;
// As find_sleep_target, making the device's strategy where nothing was allocated there yet (its
// sleeper is then set for a strategy that sleeps). Throws what making it throws.
int make_sleep_target(int k, int device, sleep_target& out);

}  // namespace gpumem::torch
