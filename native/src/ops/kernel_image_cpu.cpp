// A build without CUDA has no kernels: nothing built, nothing a device could run.
#include "ops.hpp"

namespace gpumem::ops {

std::string built_cuda_architectures() { return ""; }

int runtime_version() noexcept { return 0; }

kernel_image_info kernel_image(int) {
  kernel_image_info info;
  info.error = "built without CUDA";
  return info;
}

}  // namespace gpumem::ops
