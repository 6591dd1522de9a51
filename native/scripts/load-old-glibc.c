/* Loads gpumem's shipped binaries the way Node.js and Python do (dlopen) and, for
   libgpumem_torch.so, runs its host-only C functions: check-glibc.sh builds this against glibc
   2.17's libraries and runs it with glibc 2.17's own loader, so every symbol version, relocation and
   static constructor of the binaries meets a glibc older than any they must load on.
   Usage: load-old-glibc FILE...   Exit 0 when every file loads (and the torch library answers). */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef const char* (*text_fn)(void);
typedef const char* (*describe_fn)(const char*);

static int check_torch(void* library) {
  text_fn strategies = (text_fn)dlsym(library, "gpumem_strategies");
  describe_fn describe = (describe_fn)dlsym(library, "gpumem_describe_config");
  text_fn last_error = (text_fn)dlsym(library, "gpumem_last_error");
  if (!strategies || !describe || !last_error) {
    printf("  missing gpumem_strategies, gpumem_describe_config or gpumem_last_error\n");
    return 1;
  }
  /* Each answer lives in a thread_local string of the library (its destructor registered through
     __cxa_thread_atexit_impl) until the next call: copy it. */
  char names[4096] = "", tiered[1024] = "", error[1024] = "";
  const char* text = strategies();
  snprintf(names, sizeof names, "%s", text ? text : "");
  text = describe("GPUMEM_ALLOCATOR=tiered\n");
  snprintf(tiered, sizeof tiered, "%s", text ? text : "");
  const char* bad = describe("GPUMEM_ALLOCATOR=pol\n");
  text = last_error();
  snprintf(error, sizeof error, "%s", text ? text : "");
  printf("  strategies: %.40s...\n  describe('tiered'): %s\n  describe('pol'): %s, error: %s\n", names, tiered, bad ? bad : "(null)", error);
  return !(strstr(names, "{\"name\":\"host\"") && strstr(tiered, "strategy=tiered") && !bad && strstr(error, "pol"));
}

int main(int argc, char** argv) {
  int failed = 0;
  for (int i = 1; i < argc; ++i) {
    /* RTLD_LAZY as Node.js: gpumem.node's Node-API functions come from node, absent here. */
    void* library = dlopen(argv[i], RTLD_LAZY | RTLD_LOCAL);
    if (!library) {
      printf("load-old-glibc: FAIL %s\n", dlerror());
      failed = 1;
      continue;
    }
    int bad = 0;
    if (dlsym(library, "gpumem_describe_config")) {
      bad = check_torch(library);
    } else if (!dlsym(library, "napi_register_module_v1")) {
      printf("  no napi_register_module_v1: not a Node-API addon\n");
      bad = 1;
    }
    printf("load-old-glibc: %s %s\n", bad ? "FAIL" : "ok", argv[i]);
    failed |= bad;
  }
  return failed;
}
