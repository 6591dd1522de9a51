// Compiled into the portable binaries only (cmake/portable.cmake), which are linked against glibc
// 2.17's libraries: the five functions and variables that gpumem's code and GCC 12's static
// libstdc++ (built against the build machine's glibc) use but glibc 2.17 lacks, defined here and
// kept local to the binary (hidden), so that the binaries need no glibc newer than 2.17 for them and
// load on glibc 2.28 and later. Each does what glibc's own does.
#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#define GPUMEM_LOCAL __attribute__((visibility("hidden")))

extern "C" {

// glibc 2.32: true only while the process has never had a second thread; libstdc++'s shared_ptr
// and string reference counts skip their atomic instructions when it is true. glibc documents that
// false is always correct (it is a hint), and glibc 2.28 has no such variable: libstdc++ built for
// it asks __gthread_active_p(), which is true in any process that links libpthread, as Node.js and
// Python do. So false: always the atomic path, never a race.
GPUMEM_LOCAL char __libc_single_threaded = 0;

// glibc 2.27: the tiered strategy's host twin maps its tiers from anonymous files. glibc's is the
// system call and nothing else (ENOSYS before Linux 3.17).
GPUMEM_LOCAL int memfd_create(const char* name, unsigned int flags) {
  return static_cast<int>(syscall(SYS_memfd_create, name, flags));
}

// glibc 2.25: std::random_device's kernel source. As glibc's: at most 256 bytes (else EIO), all of
// them or an error, retried when a signal interrupts getrandom.
GPUMEM_LOCAL int getentropy(void* buffer, std::size_t length) {
  if (length > 256) {
    errno = EIO;
    return -1;
  }
  auto* out = static_cast<unsigned char*>(buffer);
  while (length > 0) {
    const long got = syscall(SYS_getrandom, out, length, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    out += got;
    length -= static_cast<std::size_t>(got);
  }
  return 0;
}

// glibc 2.36: std::random_device's "default" source on a CPU without RDRAND/RDSEED. As glibc's:
// 32 bits from the kernel's generator, and the process ends if the kernel cannot give them.
GPUMEM_LOCAL std::uint32_t arc4random(void) {
  std::uint32_t value = 0;
  if (getentropy(&value, sizeof value) != 0) {
    std::fprintf(stderr, "gpumem: arc4random: getrandom failed (errno %d)\n", errno);
    std::abort();
  }
  return value;
}

// glibc 2.18: registers the destructor of a thread_local object, to run when the thread exits
// (libstdc++'s __cxa_thread_atexit calls it). Every supported glibc (2.28 and later) has it: this
// forwards to glibc's own, found at run time. Below 2.18 the destructor is not registered (-1).
GPUMEM_LOCAL int __cxa_thread_atexit_impl(void (*destructor)(void*), void* object, void* dso_handle) {
  using impl = int (*)(void (*)(void*), void*, void*);
  static const impl glibc = reinterpret_cast<impl>(dlvsym(RTLD_DEFAULT, "__cxa_thread_atexit_impl", "GLIBC_2.18"));
  return glibc != nullptr ? glibc(destructor, object, dso_handle) : -1;
}
}
