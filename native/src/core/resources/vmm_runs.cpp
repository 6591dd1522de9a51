// Runs of granules over the VMM primitive (vmm_runs.hpp): create + map, unmap + release.
#include "vmm_runs.hpp"

namespace gpumem::detail {

vmm_runs::~vmm_runs() {
  for (auto& [addr, run] : runs_) {
    memory_->unmap(reinterpret_cast<void*>(addr), run.bytes);
    memory_->release(run.handle);
  }
}

void vmm_runs::map_run(void* addr, std::size_t bytes) {
  runs_.reserve(runs_.size() + 1);  // the only step that may throw bad_alloc: before any driver call
  const vmm::handle h = memory_->create(bytes, placement::device);
  try {
    memory_->map(addr, bytes, h, placement::device);
  } catch (...) {
    memory_->release(h);  // a failed run keeps nothing
    throw;
  }
  runs_.emplace(reinterpret_cast<std::uintptr_t>(addr), mapped_run{h, bytes});
}

void vmm_runs::unmap_run(void* addr, std::size_t bytes) noexcept {
  auto it = runs_.find(reinterpret_cast<std::uintptr_t>(addr));
  if (it == runs_.end()) return;
  memory_->unmap(addr, bytes);  // the whole run: a physical allocation is mapped and unmapped whole
  memory_->release(it->second.handle);
  runs_.erase(it);
}

}  // namespace gpumem::detail
