// Every argument check of the ops, in one place, worded as the TypeScript checks are
// (@gpumem/allocator-core validate.ts): "Expected non-negative integer for n but received -1".
// Used by the ops' entry points (ops.hpp) and by the binding's conversion of JavaScript values,
// so a bad argument reads the same whichever layer catches it. Each throws
// gpumem::invalid_argument naming the argument: kind::type for a wrong type or a null pointer,
// kind::range for a value out of range.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>

namespace gpumem::ops::check {

using i64 = std::int64_t;

// "Expected <expected> for <name> but received <received>".
[[noreturn]] void fail_range(const char* name, const std::string& expected, const std::string& received);
[[noreturn]] void fail_type(const char* name, const std::string& expected, const std::string& received);

void non_negative(i64 v, const char* name);
// v >= min.
void at_least(i64 v, i64 min, const char* name);
// v <= 2^31 - 1: a size the GPU kernels index with an int.
void fits_i32(i64 v, const char* name);
// v in [-2^31, 2^31 - 1].
void i32(i64 v, const char* name);
void not_null(const void* p, const char* name);
// A pointer argument and its name, for the list form of not_null.
struct named_pointer {
  const void* p;
  const char* name;
};
// Every pointer of an op that must be set, checked in order: the first null one is named.
void not_null(std::initializer_list<named_pointer> pointers);
// v in [0, 1).
void unit_interval(double v, const char* name);
// A JavaScript number that must be an integer (|v| <= 2^53 - 1): the binding's conversion.
i64 integer(double v, const char* name);

// An index array's entry out of range: "Expected a valid index for index[3] but received -1".
[[noreturn]] void bad_index(const char* name, i64 at, i64 value);

[[noreturn]] void no_cuda();

}  // namespace gpumem::ops::check
