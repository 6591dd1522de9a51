// The counter-based random generator shared by the CPU references and the CUDA kernels, so that
// both produce the same numbers bit for bit: value i of a call is a pure function of
// (seed, counter = offset + i), with no state between calls.
//
//   key  = mix(seed + golden)          (so that nearby seeds give unrelated streams)
//   bits = mix(key + (counter + 1) * golden)   (splitmix64's output for state `key`, step `counter`)
//
// Everything after the 64 bits uses only integer operations and correctly rounded IEEE double
// additions, multiplications, divisions and square roots, each spelled out (no fused multiply-adds:
// on the GPU through the __d*_rn intrinsics, which nvcc never contracts; on the host the build
// targets have no FMA unless -march says so, and then contraction is switched off below), and
// polynomials instead of the libraries' log/cos, whose last bits differ between the CPU and the GPU.
#pragma once
#include <cstdint>

#ifdef __CUDACC__
#define GPUMEM_HD __host__ __device__ __forceinline__
#else
#define GPUMEM_HD inline
#endif

#if !defined(__CUDA_ARCH__) && defined(__FMA__)
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif
#endif

namespace gpumem::ops::rng {

constexpr std::uint64_t golden = 0x9E3779B97F4A7C15ull;

GPUMEM_HD std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

GPUMEM_HD std::uint64_t key_of(std::uint64_t seed) { return mix(seed + golden); }

GPUMEM_HD std::uint64_t bits(std::uint64_t key, std::uint64_t counter) { return mix(key + (counter + 1) * golden); }

// Uniform in [0, 1) with 24 random bits: exact in a float, the same as a double.
GPUMEM_HD double uniform24(std::uint64_t b) { return static_cast<double>(b >> 40) * (1.0 / 16777216.0); }

GPUMEM_HD double dmul(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
GPUMEM_HD double dadd(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
GPUMEM_HD double dsub(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}
GPUMEM_HD double ddiv(double a, double b) {
#ifdef __CUDA_ARCH__
  return __ddiv_rn(a, b);
#else
  return a / b;
#endif
}
GPUMEM_HD double dsqrt(double a) {
#ifdef __CUDA_ARCH__
  return __dsqrt_rn(a);
#else
  return __builtin_sqrt(a);
#endif
}
GPUMEM_HD float to_float(double a) {
#ifdef __CUDA_ARCH__
  return __double2float_rn(a);
#else
  return static_cast<float>(a);
#endif
}

constexpr double ln2 = 0.69314718055994530942;

// ln(k) for an integer k in [1, 2^33): k = m * 2^e with m in [sqrt(1/2), sqrt(2)), then
// ln m = 2 atanh(s), s = (m-1)/(m+1), |s| < 0.172, by its series to s^17 (relative error < 1e-14).
GPUMEM_HD double log_integer(std::uint64_t k) {
#ifdef __CUDA_ARCH__
  int e = 63 - __clzll(static_cast<long long>(k));  // floor(log2 k), k >= 1
#else
  int e = 63 - __builtin_clzll(k);
#endif
  double m = ddiv(static_cast<double>(k), static_cast<double>(std::uint64_t{1} << e));  // exact
  if (m > 1.4142135623730951) {
    m = dmul(m, 0.5);
    ++e;
  }
  double s = ddiv(dsub(m, 1.0), dadd(m, 1.0));
  double s2 = dmul(s, s);
  double p = 1.0 / 17;
  p = dadd(dmul(p, s2), 1.0 / 15);
  p = dadd(dmul(p, s2), 1.0 / 13);
  p = dadd(dmul(p, s2), 1.0 / 11);
  p = dadd(dmul(p, s2), 1.0 / 9);
  p = dadd(dmul(p, s2), 1.0 / 7);
  p = dadd(dmul(p, s2), 1.0 / 5);
  p = dadd(dmul(p, s2), 1.0 / 3);
  p = dadd(dmul(p, s2), 1.0);
  return dadd(dmul(static_cast<double>(e), ln2), dmul(dmul(2.0, s), p));
}

// sin and cos of x in [0, pi/4] by their Taylor series (error < 1e-13).
GPUMEM_HD double sin_small(double x) {
  double x2 = dmul(x, x);
  double p = -1.0 / 1307674368000.0;                // -1/15!
  p = dadd(dmul(p, x2), 1.0 / 6227020800.0);        // 1/13!
  p = dadd(dmul(p, x2), -1.0 / 39916800.0);         // -1/11!
  p = dadd(dmul(p, x2), 1.0 / 362880.0);            // 1/9!
  p = dadd(dmul(p, x2), -1.0 / 5040.0);             // -1/7!
  p = dadd(dmul(p, x2), 1.0 / 120.0);               // 1/5!
  p = dadd(dmul(p, x2), -1.0 / 6.0);                // -1/3!
  return dadd(x, dmul(dmul(x, x2), p));
}
GPUMEM_HD double cos_small(double x) {
  double x2 = dmul(x, x);
  double p = 1.0 / 20922789888000.0;                // 1/16!
  p = dadd(dmul(p, x2), -1.0 / 87178291200.0);      // -1/14!
  p = dadd(dmul(p, x2), 1.0 / 479001600.0);         // 1/12!
  p = dadd(dmul(p, x2), -1.0 / 3628800.0);          // -1/10!
  p = dadd(dmul(p, x2), 1.0 / 40320.0);             // 1/8!
  p = dadd(dmul(p, x2), -1.0 / 720.0);              // -1/6!
  p = dadd(dmul(p, x2), 1.0 / 24.0);                // 1/4!
  p = dadd(dmul(p, x2), -0.5);
  return dadd(1.0, dmul(x2, p));
}

// cos(2 pi j / 2^32) for j in [0, 2^32): exact reduction to a quadrant and an angle in [0, pi/4].
GPUMEM_HD double cos_turns32(std::uint32_t j) {
  const std::uint32_t q = j >> 30;
  const std::uint32_t r = j & ((1u << 30) - 1);
  constexpr double step = 1.5707963267948966 / 1073741824.0;  // (pi/2) / 2^30
  double c, s;                                                 // cos and sin of the angle r*step
  if (r <= (1u << 29)) {
    double a = dmul(static_cast<double>(r), step);
    c = cos_small(a);
    s = sin_small(a);
  } else {
    double a = dmul(static_cast<double>((1u << 30) - r), step);  // pi/2 - angle
    c = sin_small(a);
    s = cos_small(a);
  }
  switch (q) {
    case 0: return c;
    case 1: return -s;
    case 2: return -c;
    default: return s;
  }
}

// A standard normal by Box-Muller from the 64 bits of one counter: the high 32 give
// u1 = (k+1)/2^32 in (0, 1], the low 32 the angle. |z| < 6.67 (the tail beyond is cut).
GPUMEM_HD float normal(std::uint64_t b) {
  const std::uint64_t k = (b >> 32) + 1;  // [1, 2^32]
  const double ln_u1 = dsub(log_integer(k), 32.0 * ln2);
  const double r = dsqrt(dmul(-2.0, ln_u1));
  return to_float(dmul(r, cos_turns32(static_cast<std::uint32_t>(b))));
}

// Uniform float in [low, high): low + (high - low) * u in double, rounded once; a result that
// rounds up to high becomes the float just below it.
GPUMEM_HD float uniform_in(std::uint64_t b, float low, float high) {
  double lo = low, hi = high;
  float v = to_float(dadd(lo, dmul(dsub(hi, lo), uniform24(b))));
  if (v >= high && high > low) {
    // the largest float below high (high > low, so high is not -inf)
    v = high;
#ifdef __CUDA_ARCH__
    std::uint32_t u = __float_as_uint(v);
#else
    std::uint32_t u;
    __builtin_memcpy(&u, &v, 4);
#endif
    if (v > 0.0f) --u;
    else if (v < 0.0f) ++u;
    else u = 0x80000001u;  // -denorm_min
#ifdef __CUDA_ARCH__
    v = __uint_as_float(u);
#else
    __builtin_memcpy(&v, &u, 4);
#endif
  }
  return v;
}

}  // namespace gpumem::ops::rng
