/* A minimal plug-in written in C, for plugin_resource_test: only the required functions and
 * last_error, host memory only, calls serialised by gpumem (GPUMEM_PLUGIN_FLAG_SERIALIZE, so no
 * lock here). Built twice: as is, and with MINIMAL_PLUGIN_ABI=99 to check that gpumem refuses
 * another ABI version.
 *
 * Options: "fail=N" makes every allocate return status N; "misalign=1" returns pointers 16 bytes
 * past a 256-byte boundary, as a broken library would. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpumem/plugin.h"

#ifndef MINIMAL_PLUGIN_ABI
#define MINIMAL_PLUGIN_ABI GPUMEM_PLUGIN_ABI_VERSION
#endif

typedef struct minimal_state {
  int fail;     /* status every allocate returns; 0: none */
  int misalign; /* hand out misaligned pointers */
  long live;    /* allocations not yet given back */
} minimal_state;

static void* minimal_create(const char* options, int device, char* error, size_t error_len) {
  minimal_state* s;
  if (device != -1) {
    snprintf(error, error_len, "host memory only (device -1), not device %d", device);
    return NULL;
  }
  s = (minimal_state*)calloc(1, sizeof *s);
  if (s == NULL) {
    snprintf(error, error_len, "out of host memory");
    return NULL;
  }
  if (strncmp(options, "fail=", 5) == 0) s->fail = atoi(options + 5);
  else if (strcmp(options, "misalign=1") == 0) s->misalign = 1;
  else if (options[0] != '\0') {
    snprintf(error, error_len, "unknown options '%s'", options);
    free(s);
    return NULL;
  }
  return s;
}

static int minimal_allocate(void* state, size_t bytes, void* stream, void** out) {
  minimal_state* s = (minimal_state*)state;
  char* p;
  (void)stream;
  if (s->fail != 0) return s->fail;
  p = (char*)aligned_alloc(GPUMEM_PLUGIN_ALIGNMENT, (bytes + 16 + 255) / 256 * 256);
  if (p == NULL) return GPUMEM_PLUGIN_OUT_OF_MEMORY;
  ++s->live;
  *out = s->misalign ? p + 16 : p;
  return GPUMEM_PLUGIN_OK;
}

static void minimal_deallocate(void* state, void* ptr, size_t bytes, void* stream) {
  minimal_state* s = (minimal_state*)state;
  (void)bytes;
  (void)stream;
  free(s->misalign ? (char*)ptr - 16 : (char*)ptr);
  --s->live;
}

static void minimal_destroy(void* state) { free(state); }

static const char* minimal_last_error(void* state) {
  minimal_state* s = (minimal_state*)state;
  return s->fail != 0 ? "told to fail" : "";
}

static const gpumem_plugin_v1 minimal_table = {
    MINIMAL_PLUGIN_ABI,
    GPUMEM_PLUGIN_FLAG_SERIALIZE,
    minimal_create,
    minimal_allocate,
    minimal_deallocate,
    minimal_destroy,
    minimal_last_error,
    NULL, /* stats: gpumem's own counts stand */
    NULL, /* trim */
    NULL, /* name: the file name */
};

const gpumem_plugin_v1* gpumem_plugin_get(void) { return &minimal_table; }
