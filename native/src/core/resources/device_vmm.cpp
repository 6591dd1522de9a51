// The VMM primitive (gpumem/vmm.hpp) on a GPU through CUDA's virtual memory management: device
// memory (CU_MEM_LOCATION_TYPE_DEVICE) and, for a strategy with a host tier, pinned host memory of
// the device's nearest NUMA node (CU_MEM_LOCATION_TYPE_HOST_NUMA), both created with cuMemCreate and
// mapped with cuMemMap into ranges from cuMemAddressReserve, so that a block moves between them and
// keeps its address, and a sleep gives memory back and maps it again at the same address.
// Host-located memory is made accessible to the device and to the host (kernels read it in place
// over the interconnect, at the bandwidth of cudaHostAllocMapped memory: 51.1 vs 51.0 GB/s measured
// on an H100). The peers of the peerAccess option get read/write access to every mapping, on both
// tiers, so that a block stays usable from them when it moves. The driver API is not linked: its
// entry points are looked up once through the runtime (cuda_driver.hpp), so that the addon loads
// where there is no driver and only the strategies that map memory report what is missing.
#include <numeric>
#include <string>
#include <vector>

#include "gpumem/errors.hpp"
#include "gpumem/vmm.hpp"

#ifdef GPUMEM_WITH_CUDA
#include <cuda.h>

#include "../cuda_check.hpp"
#include "cuda_driver.hpp"
#endif

namespace gpumem {

#ifdef GPUMEM_WITH_CUDA

namespace {

using detail::driver_api;

constexpr std::uint64_t context_headroom = std::uint64_t{1} << 30;  // the CUDA context, cuBLAS, ...

// An attribute the driver may not know (an older driver): `fallback` then, rather than an error.
int attribute(const driver_api& api, CUdevice_attribute which, CUdevice dev, int fallback) {
  int value = fallback;
  if (api.device_get_attribute(&value, which, dev) != CUDA_SUCCESS) return fallback;
  return value;
}

class device_vmm final : public vmm {
 public:
  device_vmm(int device, const vmm_options& options)
      : api_(detail::driver()), device_(device), owner_(options.owner) {
    if (!api_.failure.empty()) throw invalid_state(owner_ + ": needs CUDA virtual memory management, but " + api_.failure);
    {
      detail::device_scope scope(device);                     // validates the ordinal
      detail::check_cuda(detail::cu::Free(nullptr), "cudaFree(0)");  // creates the primary context
    }
    CUdevice dev = 0;
    check(api_.device_get(&dev, device), "cuDeviceGet");
    const std::string which = owner_ + ": device " + std::to_string(device);
    if (attribute(api_, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev, 0) == 0) {
      throw invalid_state(which + " does not support CUDA virtual memory management "
                                  "(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED is 0)");
    }
    if (options.host_tier) {
      if (attribute(api_, CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev, 0) == 0) {
        throw invalid_state(which +
                            " cannot map host memory through CUDA virtual memory management "
                            "(CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED is 0: it needs a "
                            "CUDA 12.2 or later driver on Linux); the host tier is not available there");
      }
      const int numa = attribute(api_, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev, -1);
      numa_ = numa < 0 ? 0 : numa;  // -1: no NUMA; cuMemCreate then wants node 0
    }
    check(api_.device_total_mem(&total_, dev), "cuDeviceTotalMem");

    device_prop_.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    device_prop_.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    device_prop_.location.id = device;
    host_prop_.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    host_prop_.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    host_prop_.location.id = numa_;
    // Device-located memory: the device and its peers. Host-located memory: those and the CPU.
    CUmemAccessDesc self{};
    self.location = device_prop_.location;
    self.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    device_access_.push_back(self);
    for (int peer : options.peers) {
      CUmemAccessDesc d{};
      d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      d.location.id = peer;
      d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
      device_access_.push_back(d);
    }
    host_access_ = device_access_;
    CUmemAccessDesc cpu{};
    cpu.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    cpu.location.id = numa_;
    cpu.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    host_access_.push_back(cpu);
    if (options.granule_bytes != 0) {
      const std::size_t minimum = granularity(device_prop_, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
      if (options.granule_bytes % minimum != 0) {
        throw invalid_argument(invalid_argument::kind::range, "granuleBytes",
                               "Expected granuleBytes to be a multiple of device " + std::to_string(device) +
                                   "'s granularity (" + std::to_string(minimum) + ") but received " +
                                   std::to_string(options.granule_bytes));
      }
      granule_ = options.granule_bytes;
    } else if (options.host_tier) {
      // One granule for both tiers (a block moves between them): the least common multiple of the
      // two recommended granularities (2 MiB each on current GPUs).
      granule_ = std::lcm(recommended(device_prop_), recommended(host_prop_));
    } else {
      granule_ = recommended(device_prop_);
    }
  }

  std::size_t granule_bytes() const noexcept override { return granule_; }

  void* reserve(std::size_t bytes) override {
    CUdeviceptr base = 0;
    const CUresult status = api_.address_reserve(&base, bytes, granule_, 0, 0);
    if (status == CUDA_ERROR_OUT_OF_MEMORY || status == CUDA_ERROR_INVALID_VALUE) {
      throw out_of_memory(owner_ + ": cuMemAddressReserve of " + format_bytes(bytes) + " failed", bytes, {});
    }
    check(status, "cuMemAddressReserve");
    return reinterpret_cast<void*>(base);
  }

  void free_range(void* base, std::size_t bytes) noexcept override {
    api_.address_free(reinterpret_cast<CUdeviceptr>(base), bytes);
  }

  handle create(std::size_t bytes, placement tier) override {
    CUmemGenericAllocationHandle h = 0;
    const CUresult status = api_.create(&h, bytes, tier == placement::device ? &device_prop_ : &host_prop_, 0);
    if (status == CUDA_ERROR_OUT_OF_MEMORY) {
      throw out_of_memory(owner_ + ": cuMemCreate of " + format_bytes(bytes) + " " +
                              (tier == placement::device ? std::string("on the device")
                                                           : "in host memory (NUMA node " + std::to_string(numa_) + ")") +
                              " failed: out of memory",
                          bytes, {});
    }
    check(status, tier == placement::device ? "cuMemCreate (device)" : "cuMemCreate (host NUMA)");
    return static_cast<handle>(h);
  }

  void release(handle h) noexcept override { api_.release(static_cast<CUmemGenericAllocationHandle>(h)); }

  void map(void* addr, std::size_t bytes, handle h, placement tier) override {
    const auto ptr = reinterpret_cast<CUdeviceptr>(addr);
    CUresult status = api_.map(ptr, bytes, 0, static_cast<CUmemGenericAllocationHandle>(h), 0);
    if (status == CUDA_SUCCESS) {
      const std::vector<CUmemAccessDesc>& access = tier == placement::host ? host_access_ : device_access_;
      status = api_.set_access(ptr, bytes, access.data(), access.size());
      if (status != CUDA_SUCCESS) api_.unmap(ptr, bytes);
    }
    if (status == CUDA_ERROR_OUT_OF_MEMORY) {
      throw out_of_memory(owner_ + ": mapping " + format_bytes(bytes) + " failed: out of memory", bytes, {});
    }
    check(status, "cuMemMap/cuMemSetAccess");
  }

  void unmap(void* addr, std::size_t bytes) noexcept override {
    api_.unmap(reinterpret_cast<CUdeviceptr>(addr), bytes);
  }

  void copy(void* dst, const void* src, std::size_t bytes, stream_handle stream) override {
    detail::device_scope scope(device_);
    detail::check_cuda(detail::cu::MemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream)),
                       (owner_ + ": cudaMemcpyAsync").c_str());
  }

  void synchronize(stream_handle stream) override {
    detail::device_scope scope(device_);
    detail::check_cuda(detail::cu::StreamSynchronize(static_cast<cudaStream_t>(stream)), (owner_ + ": cudaStreamSynchronize").c_str());
  }

  void synchronize_device() noexcept override {
    try {
      detail::device_scope scope(device_);
      detail::cu::DeviceSynchronize();
    } catch (...) {
    }
  }

  std::uint64_t default_device_budget() const override {
    detail::device_scope scope(device_);
    std::size_t free = 0;
    std::size_t total = 0;
    detail::check_cuda(detail::cu::MemGetInfo(&free, &total), (owner_ + ": cudaMemGetInfo").c_str());
    return free > context_headroom ? free - context_headroom : 0;
  }

  std::uint64_t total_bytes() const noexcept override { return total_; }
  memory_kind kind() const noexcept override { return memory_kind::device; }
  int device() const noexcept override { return device_; }

 private:
  void check(CUresult status, const char* what) const { detail::check_driver(api_, status, owner_.c_str(), what); }

  std::size_t granularity(const CUmemAllocationProp& prop, CUmemAllocationGranularity_flags which) const {
    std::size_t bytes = 0;
    check(api_.get_granularity(&bytes, &prop, which), "cuMemGetAllocationGranularity");
    return bytes;
  }

  // The recommended granularity where the minimum divides it, else the minimum.
  std::size_t recommended(const CUmemAllocationProp& prop) const {
    std::size_t minimum = granularity(prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    const std::size_t recommended = granularity(prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
    if (minimum == 0) minimum = std::size_t{2} << 20;
    return recommended != 0 && recommended % minimum == 0 ? recommended : minimum;
  }

  const driver_api& api_;
  int device_;
  std::string owner_;
  std::size_t total_ = 0;
  int numa_ = 0;
  std::size_t granule_ = 0;
  CUmemAllocationProp device_prop_{};
  CUmemAllocationProp host_prop_{};
  std::vector<CUmemAccessDesc> device_access_;  // the device, then its peers
  std::vector<CUmemAccessDesc> host_access_;    // those, then the CPU (its NUMA node)
};

}  // namespace

std::unique_ptr<vmm> make_device_vmm(int device, const vmm_options& options) {
  return std::make_unique<device_vmm>(device, options);
}

#else

std::unique_ptr<vmm> make_device_vmm(int, const vmm_options& options) {
  throw invalid_state(options.owner + ": gpumem was built without CUDA; use the host twin (" + options.host_twin_hint + ")");
}

#endif

}  // namespace gpumem
