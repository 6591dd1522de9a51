#include "gpumem/errors.hpp"

#include <cstdio>
#include <string>

namespace gpumem {

std::string format_pointer(const void* ptr) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(ptr)));
  return buf;
}

std::string format_bytes_brief(std::uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  char buf[48];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  }
  return buf;
}

std::string describe_memory(const resource_stats& s) {
  const std::uint64_t unallocated = s.reserved_bytes > s.allocated_bytes ? s.reserved_bytes - s.allocated_bytes : 0;
  const std::uint64_t largest = s.largest_free_block > 0 ? static_cast<std::uint64_t>(s.largest_free_block) : 0;
  return "(reserved " + format_bytes_brief(s.reserved_bytes) + ", allocated " + format_bytes_brief(s.allocated_bytes) +
         ": " + format_bytes_brief(unallocated) + " reserved but unallocated, largest free block " +
         format_bytes_brief(largest) + ")";
}

namespace {
// "CUDA 12.2 (driver R535 or later)": the oldest Linux driver branch of each CUDA 12/13 release
// (CUDA's release notes, "CUDA Toolkit and Corresponding Driver Versions").
std::string cuda_release(int version) {
  static const struct {
    int cuda;
    int branch;
  } branches[] = {{12000, 525}, {12010, 530}, {12020, 535}, {12030, 545}, {12040, 550},
                  {12050, 555}, {12060, 560}, {12080, 570}, {12090, 575}, {13000, 580}};
  std::string out = "CUDA " + std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
  for (const auto& b : branches) {
    if (b.cuda == version) return out + " (driver R" + std::to_string(b.branch) + " or later)";
  }
  return out;
}
}  // namespace

driver_unsupported::driver_unsupported(std::string strategy, std::string need, int required_version, int driver_version)
    : invalid_state("gpumem: strategy '" + strategy + "' needs " + need + ", which came with " +
                    cuda_release(required_version) + ", but the NVIDIA driver supports CUDA " +
                    std::to_string(driver_version / 1000) + "." + std::to_string(driver_version % 1000 / 10) +
                    ": update the driver or choose another strategy"),
      strategy_(std::move(strategy)),
      need_(std::move(need)),
      required_version_(required_version),
      driver_version_(driver_version) {}

std::string format_bytes(std::uint64_t bytes) {
  // the brief form, and the exact count where the brief one rounds
  if (bytes < 1024) return format_bytes_brief(bytes);
  return format_bytes_brief(bytes) + " (" + std::to_string(bytes) + " bytes)";
}

void throw_unknown_pointer(const void* ptr) {
  throw invalid_argument(invalid_argument::kind::type, "ptr",
                         "Expected ptr to be a live allocation of this allocator but received " +
                             format_pointer(ptr) + " (never allocated here, or already freed)");
}

void throw_size_mismatch(const void* ptr, std::uint64_t given, std::uint64_t expected) {
  throw invalid_argument(invalid_argument::kind::range, "bytes",
                         "Expected bytes to be " + std::to_string(expected) + ", the size allocated at " +
                             format_pointer(ptr) + ", but received " + std::to_string(given));
}

void throw_zero_size() {
  throw invalid_argument(invalid_argument::kind::range, "bytes", "Expected bytes to be a positive integer but received 0");
}

}  // namespace gpumem
