// CUDA virtual memory management as physical_memory: one cuMemCreate'd handle per run of granules,
// mapped into a cuMemAddressReserve'd range with one cuMemMap and one cuMemSetAccess (read/write for
// the device and for each peer of the peerAccess option). The driver API is not linked: its entry
// points come from the driver table (cuda_driver.hpp, shared with tiered's device_tier_memory), so
// that the addon loads where there is no driver and only this strategy reports what is missing.
#include <string>
#include <unordered_map>
#include <vector>

#include "gpumem/errors.hpp"
#include "gpumem/physical_memory.hpp"

#ifdef GPUMEM_WITH_CUDA
#include <cuda.h>

#include "../cuda_check.hpp"
#include "cuda_driver.hpp"
#endif

namespace gpumem {

#ifdef GPUMEM_WITH_CUDA

namespace {

using detail::driver;
using detail::driver_api;

void check(const driver_api& api, CUresult status, const char* what) {
  detail::check_driver(api, status, "expandable", what);
}

[[noreturn]] void throw_driver(const driver_api& api, CUresult status, const char* what) {
  detail::throw_driver(api, status, "expandable", what);
}

class device_physical_memory final : public physical_memory {
 public:
  device_physical_memory(int device, std::size_t granule_option, const std::vector<int>& peers)
      : api_(driver()), device_(device) {
    if (!api_.failure.empty()) throw invalid_state("expandable: needs CUDA virtual memory management, but " + api_.failure);
    {
      detail::device_scope scope(device);         // validates the ordinal
      detail::check_cuda(detail::cu::Free(nullptr), "cudaFree(0)");  // creates the primary context
    }
    CUdevice dev = 0;
    check(api_, api_.device_get(&dev, device), "cuDeviceGet");
    int vmm = 0;
    check(api_, api_.device_get_attribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev),
          "cuDeviceGetAttribute");
    if (vmm == 0) {
      throw invalid_state("expandable: device " + std::to_string(device) +
                          " does not support CUDA virtual memory management (CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED is 0)");
    }
    check(api_, api_.device_total_mem(&total_, dev), "cuDeviceTotalMem");
    prop_.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop_.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop_.location.id = device;
    // The device first, then each peer: every run is mapped read/write for all of them.
    access_.resize(1 + peers.size());
    access_[0].location = prop_.location;
    access_[0].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    for (std::size_t i = 0; i < peers.size(); ++i) {
      access_[1 + i].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      access_[1 + i].location.id = peers[i];
      access_[1 + i].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    }
    std::size_t minimum = 0;
    std::size_t recommended = 0;
    check(api_, api_.get_granularity(&minimum, &prop_, CU_MEM_ALLOC_GRANULARITY_MINIMUM), "cuMemGetAllocationGranularity");
    check(api_, api_.get_granularity(&recommended, &prop_, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
          "cuMemGetAllocationGranularity");
    if (granule_option == 0) {
      granule_ = recommended != 0 && recommended % minimum == 0 ? recommended : minimum;
    } else if (granule_option % minimum != 0) {
      throw invalid_argument(invalid_argument::kind::range, "granuleBytes",
                             "Expected granuleBytes to be a multiple of device " + std::to_string(device) +
                                 "'s granularity (" + std::to_string(minimum) + ") but received " +
                                 std::to_string(granule_option));
    } else {
      granule_ = granule_option;
    }
  }

  ~device_physical_memory() override {
    // The owner unmaps every run before it goes; anything left is released here, quietly.
    for (auto& [addr, run] : runs_) {
      api_.unmap(addr, run.bytes);
      api_.release(run.handle);
    }
  }

  std::size_t granule_bytes() const noexcept override { return granule_; }

  void* reserve_range(std::size_t bytes) override {
    CUdeviceptr base = 0;
    const CUresult status = api_.address_reserve(&base, bytes, granule_, 0, 0);
    if (status == CUDA_ERROR_OUT_OF_MEMORY || status == CUDA_ERROR_INVALID_VALUE) {
      throw out_of_memory("expandable: cuMemAddressReserve of " + format_bytes(bytes) + " failed", bytes, {});
    }
    check(api_, status, "cuMemAddressReserve");
    return reinterpret_cast<void*>(base);
  }

  void release_range(void* base, std::size_t bytes) noexcept override {
    api_.address_free(reinterpret_cast<CUdeviceptr>(base), bytes);
  }

  void map_run(void* addr, std::size_t bytes) override {
    const auto ptr = reinterpret_cast<CUdeviceptr>(addr);
    runs_.reserve(runs_.size() + 1);  // the only step that may throw bad_alloc: before any driver call
    CUmemGenericAllocationHandle handle = 0;
    CUresult status = api_.create(&handle, bytes, &prop_, 0);
    if (status == CUDA_ERROR_OUT_OF_MEMORY) {
      throw out_of_memory("expandable: cuMemCreate of a " + format_bytes(bytes) + " run failed: out of device memory",
                          bytes, {});
    }
    check(api_, status, "cuMemCreate");
    status = api_.map(ptr, bytes, 0, handle, 0);
    if (status == CUDA_SUCCESS) {
      status = api_.set_access(ptr, bytes, access_.data(), access_.size());
      if (status != CUDA_SUCCESS) api_.unmap(ptr, bytes);
    }
    if (status != CUDA_SUCCESS) {
      api_.release(handle);
      if (status == CUDA_ERROR_OUT_OF_MEMORY) {
        throw out_of_memory("expandable: mapping a " + format_bytes(bytes) + " run failed: out of device memory",
                            bytes, {});
      }
      throw_driver(api_, status, "cuMemMap/cuMemSetAccess");
    }
    runs_.emplace(ptr, mapped_run{handle, bytes});
  }

  void unmap_run(void* addr, std::size_t bytes) noexcept override {
    const auto ptr = reinterpret_cast<CUdeviceptr>(addr);
    auto it = runs_.find(ptr);
    if (it == runs_.end()) return;
    api_.unmap(ptr, bytes);  // the whole run: a physical allocation is mapped and unmapped whole
    api_.release(it->second.handle);
    runs_.erase(it);
  }

  void synchronize() noexcept override {
    try {
      detail::device_scope scope(device_);
      detail::cu::DeviceSynchronize();
    } catch (...) {
    }
  }

  std::uint64_t total_bytes() const noexcept override { return total_; }
  memory_kind kind() const noexcept override { return memory_kind::device; }
  int device() const noexcept override { return device_; }

 private:
  const driver_api& api_;
  int device_;
  std::size_t granule_ = 0;
  std::size_t total_ = 0;
  CUmemAllocationProp prop_{};
  std::vector<CUmemAccessDesc> access_;  // the device, then its peers
  struct mapped_run {
    CUmemGenericAllocationHandle handle;
    std::size_t bytes;
  };
  std::unordered_map<CUdeviceptr, mapped_run> runs_;  // by start address
};

}  // namespace

std::unique_ptr<physical_memory> make_device_physical_memory(int device, std::size_t granule_bytes,
                                                             const std::vector<int>& peers) {
  return std::make_unique<device_physical_memory>(device, granule_bytes, peers);
}

#else

std::unique_ptr<physical_memory> make_device_physical_memory(int, std::size_t, const std::vector<int>&) {
  throw invalid_state("expandable: gpumem was built without CUDA; use the host twin (device 'host')");
}

#endif

}  // namespace gpumem
