// The out-of-memory report's event ring on the hot path: gpumem_malloc + gpumem_free pairs through
// libgpumem_torch.so's exported entry points (what PyTorch's CUDAPluggableAllocator calls), timed in
// a native loop, so that the difference between GPUMEM_OOM_WINDOW=0 and a ring is not lost in a
// Python loop's noise. The ring is configured by the environment (GPUMEM_ALLOCATOR,
// GPUMEM_OOM_WINDOW): bench/torch/oom-ring.py runs one process per setting, interleaved.
//
//   oom_ring_bench LIBRARY ROUNDS PAIRS HELD
//
// Each round times PAIRS pairs of sizes cycling through a fixed mix (512 B to 4 MiB) while HELD
// blocks stay live (so the ring's live table holds entries, as in a training step), and prints one
// JSON line: {"ns_per_pair": [round, ...]}. Needs a CUDA device; loads nothing but the library.
#include <dlfcn.h>
#include <sys/types.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using malloc_fn = void* (*)(ssize_t, int, void*);
using free_fn = void (*)(void*, ssize_t, int, void*);
using init_fn = int (*)();
using error_fn = const char* (*)();

long parse_positive(const char* text, const char* what) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < 0) {
    std::fprintf(stderr, "oom_ring_bench: expected a non-negative integer for %s but received '%s'\n", what, text);
    std::exit(2);
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: oom_ring_bench LIBRARY ROUNDS PAIRS HELD\n");
    return 2;
  }
  const long rounds = parse_positive(argv[2], "ROUNDS");
  const long pairs = parse_positive(argv[3], "PAIRS");
  const long held = parse_positive(argv[4], "HELD");
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "oom_ring_bench: %s\n", dlerror());
    return 1;
  }
  auto init = reinterpret_cast<init_fn>(dlsym(lib, "gpumem_init"));
  auto last_error = reinterpret_cast<error_fn>(dlsym(lib, "gpumem_last_error"));
  auto gm_malloc = reinterpret_cast<malloc_fn>(dlsym(lib, "gpumem_malloc"));
  auto gm_free = reinterpret_cast<free_fn>(dlsym(lib, "gpumem_free"));
  if (init == nullptr || last_error == nullptr || gm_malloc == nullptr || gm_free == nullptr) {
    std::fprintf(stderr, "oom_ring_bench: %s lacks the gpumem_* entry points\n", argv[1]);
    return 1;
  }
  if (init() != 0) {
    std::fprintf(stderr, "oom_ring_bench: gpumem_init: %s\n", last_error());
    return 1;
  }
  static const ssize_t mix[] = {512, 4096, 65536, 1 << 20, 512, 8192, 4 << 20, 131072};
  constexpr int mix_count = sizeof(mix) / sizeof(mix[0]);
  std::vector<void*> live;
  for (long i = 0; i < held; ++i) {
    void* p = gm_malloc(mix[i % mix_count], 0, nullptr);
    if (p == nullptr) {
      std::fprintf(stderr, "oom_ring_bench: %s\n", last_error());
      return 1;
    }
    live.push_back(p);
  }
  // warm the strategy's caches: every size of the mix served once from cached memory
  for (int i = 0; i < 10000; ++i) {
    void* p = gm_malloc(mix[i % mix_count], 0, nullptr);
    if (p == nullptr) {
      std::fprintf(stderr, "oom_ring_bench: %s\n", last_error());
      return 1;
    }
    gm_free(p, mix[i % mix_count], 0, nullptr);
  }
  std::string out = "{\"ns_per_pair\": [";
  for (long r = 0; r < rounds; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (long i = 0; i < pairs; ++i) {
      const ssize_t bytes = mix[i % mix_count];
      void* p = gm_malloc(bytes, 0, nullptr);
      if (p == nullptr) {
        std::fprintf(stderr, "oom_ring_bench: %s\n", last_error());
        return 1;
      }
      gm_free(p, bytes, 0, nullptr);
    }
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
    char cell[64];
    std::snprintf(cell, sizeof(cell), "%s%.2f", r == 0 ? "" : ", ", ns / static_cast<double>(pairs));
    out += cell;
  }
  out += "]}";
  for (long i = 0; i < held; ++i) gm_free(live[i], mix[i % mix_count], 0, nullptr);
  std::printf("%s\n", out.c_str());
  return 0;
}
