#include "op_args.hpp"

#include <cmath>
#include <cstdio>

#include "gpumem/errors.hpp"

namespace gpumem::ops::check {
namespace {

constexpr i64 i32_max = 0x7fffffff;
constexpr i64 i32_min = -i32_max - 1;
constexpr double max_safe = 9007199254740991.0;  // 2^53 - 1

std::string show(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

void fail_range(const char* name, const std::string& expected, const std::string& received) {
  throw invalid_argument(invalid_argument::kind::range, name,
                         "Expected " + expected + " for " + name + " but received " + received);
}

void fail_type(const char* name, const std::string& expected, const std::string& received) {
  throw invalid_argument(invalid_argument::kind::type, name,
                         "Expected " + expected + " for " + name + " but received " + received);
}

void non_negative(i64 v, const char* name) {
  if (v < 0) fail_range(name, "non-negative integer", std::to_string(v));
}

void at_least(i64 v, i64 min, const char* name) {
  if (v < min) fail_range(name, "integer >= " + std::to_string(min), std::to_string(v));
}

void fits_i32(i64 v, const char* name) {
  if (v > i32_max) fail_range(name, "integer <= 2147483647 (an i32 on the GPU)", std::to_string(v));
}

void i32(i64 v, const char* name) {
  if (v < i32_min || v > i32_max) fail_range(name, "an i32 (integer in [-2^31, 2^31 - 1])", std::to_string(v));
}

void not_null(const void* p, const char* name) {
  if (p == nullptr) fail_type(name, "a pointer (positive integer)", "0 (a null pointer)");
}

void not_null(std::initializer_list<named_pointer> pointers) {
  for (const named_pointer& a : pointers) not_null(a.p, a.name);
}

void unit_interval(double v, const char* name) {
  if (!(v >= 0.0 && v < 1.0)) fail_range(name, "a number in [0, 1)", show(v));
}

i64 integer(double v, const char* name) {
  if (!std::isfinite(v) || std::floor(v) != v || std::fabs(v) > max_safe)
    fail_range(name, "integer", show(v) + " of type number");
  return static_cast<i64>(v);
}

void bad_index(const char* name, i64 at, i64 value) {
  const std::string entry = std::string(name) + "[" + std::to_string(at) + "]";
  throw invalid_argument(invalid_argument::kind::range, name,
                         "Expected a valid index for " + entry + " but received " + std::to_string(value));
}

void no_cuda() { throw invalid_state("built without CUDA: onDevice=true is not available"); }

}  // namespace gpumem::ops::check
