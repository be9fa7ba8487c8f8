// The C interface between the runtime and its Gloo plugin (libtracer_gloo.so, runtime/gloo/):
// the plugin links Debian's libgloo, the runtime only dlopens it, so the one binary runs where
// Gloo is absent (docs/distributed.md). Every call returns 0, or nonzero with the reason in err.
#pragma once
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TRACER_GLOO_ABI 1

// The rendezvous store, as callbacks (Gloo's store interface sits on them).
typedef struct tracer_gloo_store {
  void* ctx;
  int (*set)(void* ctx, const char* key, const char* data, size_t n, char* err, size_t errlen);
  // Waits up to timeout_ms for key; *data is malloc'ed (the plugin frees it).
  int (*get)(void* ctx, const char* key, long timeout_ms, char** data, size_t* n, char* err, size_t errlen);
} tracer_gloo_store;

// dtype: 0 f32, 1 f64, 2 f16, 3 bf16, 4 i32, 5 i64, 6 i8, 7 u8; op: 0 sum, 1 max, 2 min.
typedef struct tracer_gloo_api {
  int abi;
  void* (*create)(const tracer_gloo_store* store, int rank, int size, const char* host, long timeout_ms, char* err, size_t errlen);
  void (*destroy)(void* comm);
  int (*all_reduce)(void* comm, void* buf, size_t n, int dtype, int op, char* err, size_t errlen);
  // out holds size * n elements: rank r's n at r * n.
  int (*all_gather)(void* comm, const void* in, void* out, size_t n, int dtype, char* err, size_t errlen);
  int (*broadcast)(void* comm, void* buf, size_t n, int dtype, int root, char* err, size_t errlen);
  int (*barrier)(void* comm, char* err, size_t errlen);
} tracer_gloo_api;

// The plugin's one exported symbol.
const tracer_gloo_api* tracer_gloo_plugin(void);

#ifdef __cplusplus
}
#endif
