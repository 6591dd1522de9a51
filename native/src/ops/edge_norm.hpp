// The GCN edge weight from its endpoints' degrees, shared by the CPU references and the kernels:
// correctly rounded operations on both sides, so the two agree bit for bit.
#pragma once
#include <cmath>

#include "rng.hpp"  // GPUMEM_HD

namespace gpumem::ops {

// mode 0: 1/sqrt(d_row * d_col); 1: 1/d_row; 2: 1/d_col; 0 where the degree used is 0.
GPUMEM_HD float edge_norm_value(float d_row, float d_col, int mode) {
#ifdef __CUDA_ARCH__
  if (mode == 0) {
    const float p = __fmul_rn(d_row, d_col);
    return p == 0.0f ? 0.0f : __fdiv_rn(1.0f, __fsqrt_rn(p));
  }
  const float d = mode == 1 ? d_row : d_col;
  return d == 0.0f ? 0.0f : __fdiv_rn(1.0f, d);
#else
  if (mode == 0) {
    const float p = d_row * d_col;
    return p == 0.0f ? 0.0f : 1.0f / std::sqrt(p);
  }
  const float d = mode == 1 ? d_row : d_col;
  return d == 0.0f ? 0.0f : 1.0f / d;
#endif
}

}  // namespace gpumem::ops
