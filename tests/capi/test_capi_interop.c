/* Tests of the C API's exchanges with its host: DLPack in and out, native ops a host registers,
 * two states side by side, handles released after close, the memory limit, and a job of one rank.
 * Part of tracer_capi_tests (tests/capi/test_capi.c has main). */
#include <dlpack/dlpack.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capi_check.h"

/* A DLPack producer of our own: a malloc'ed f32 array. */
typedef struct {
  DLManagedTensor m;
  int64_t shape[2];
  int* deleted;
} Producer;
static void producer_delete(DLManagedTensor* self) {
  Producer* p = (Producer*)self->manager_ctx;
  ++*p->deleted;
  free(self->dl_tensor.data);
  free(p);
}
static DLManagedTensor* make_dl(int64_t r, int64_t c, int* deleted, int device_type) {
  Producer* p = (Producer*)calloc(1, sizeof(Producer));
  p->shape[0] = r;
  p->shape[1] = c;
  p->deleted = deleted;
  float* data = (float*)malloc(sizeof(float) * (size_t)(r * c));
  for (int64_t i = 0; i < r * c; ++i) data[i] = (float)i;
  p->m.dl_tensor.data = data;
  p->m.dl_tensor.device.device_type = (DLDeviceType)device_type;
  p->m.dl_tensor.ndim = 2;
  p->m.dl_tensor.dtype.code = kDLFloat;
  p->m.dl_tensor.dtype.bits = 32;
  p->m.dl_tensor.dtype.lanes = 1;
  p->m.dl_tensor.shape = p->shape;
  p->m.manager_ctx = p;
  p->m.deleter = producer_delete;
  return &p->m;
}

void test_dlpack(void) {
  tracer_state* S = NULL;
  CHECK_OK(S, tracer_open(NULL, &S));
  CHECK_OK(S, tracer_load_string(S, "m.trace", "def double(x):\n    return x * 2.0\n"));
  tracer_function* dbl = NULL;
  CHECK_OK(S, tracer_function_get(S, "double", &dbl));
  int deleted = 0;
  tracer_tensor* t = NULL;
  CHECK_OK(S, tracer_tensor_from_dlpack(S, make_dl(2, 3, &deleted, kDLCPU), &t));
  CHECK(deleted == 0);
  CHECK(tracer_tensor_ndim(t) == 2 && tracer_tensor_shape(t)[1] == 3);
  tracer_value args[1] = {tracer_value_tensor(t)}, out[1];
  size_t n = 0;
  CHECK_OK(S, tracer_call(S, dbl, args, 1, out, 1, &n));
  /* export the result: the consumer sees the elements and calls the deleter */
  DLManagedTensor* m = NULL;
  CHECK_OK(S, tracer_tensor_to_dlpack(out[0].as.tensor, &m));
  tracer_values_release(out, n); /* the export holds its own reference */
  CHECK(m->dl_tensor.device.device_type == kDLCPU && m->dl_tensor.ndim == 2 && m->dl_tensor.dtype.bits == 32);
  CHECK(((const float*)m->dl_tensor.data)[5] == 10.0f);
  m->deleter(m);
  tracer_tensor_release(t);
  CHECK(deleted == 1);
  /* A GPU tensor is refused, and its deleter still runs (ownership passed). */
  CHECK(tracer_tensor_from_dlpack(S, make_dl(2, 2, &deleted, kDLCUDA), &t) == TRACER_ERROR_UNSUPPORTED);
  CHECK(deleted == 2);
  CHECK(strstr(tracer_last_error(S), "CPU") != NULL);
  /* Strides that are not row-major are refused. */
  DLManagedTensor* tr = make_dl(2, 3, &deleted, kDLCPU);
  int64_t strides[2] = {1, 2};
  tr->dl_tensor.strides = strides;
  CHECK(tracer_tensor_from_dlpack(S, tr, &t) == TRACER_ERROR_UNSUPPORTED);
  CHECK(deleted == 3);
  tracer_function_release(dbl);
  tracer_close(S);
}

/* ---- native ops: y = x * factor (f32 only), a primitive of the host's ---- */

static tracer_status scale_type(tracer_state* S, void* user, const tracer_type* in, size_t n, tracer_type* out) {
  (void)user;
  if (n != 1 || in[0].dtype != TRACER_F32) return tracer_native_error(S, "native.scaled takes one f32 tensor");
  *out = in[0];
  return TRACER_OK;
}
static int kernel_calls = 0;
static tracer_status scale_kernel(tracer_state* S, void* user, const tracer_tensor* const* in, size_t n, void* out,
                                  const tracer_type* t) {
  (void)S, (void)n;
  float factor = *(const float*)user;
  ++kernel_calls;
  const float* x = (const float*)tracer_tensor_data(in[0]);
  int64_t numel = 1;
  for (int i = 0; i < t->ndim; ++i) numel *= t->shape[i];
  for (int64_t i = 0; i < numel; ++i) ((float*)out)[i] = x[i] * factor;
  return TRACER_OK;
}

void test_native_ops(void) {
  tracer_state* S = NULL;
  CHECK_OK(S, tracer_open(NULL, &S));
  float factor = 3.0f;
  tracer_op ops[1] = {{"scaled", "native.scaled(x: f32 tensor) -> f32 tensor", "x times the host's factor.", 1, scale_type,
                       scale_kernel, &factor}};
  CHECK_OK(S, tracer_register_ops(S, ops, 1));
  tracer_op bad = {"2bad", "", "", 1, scale_type, scale_kernel, NULL};
  CHECK(tracer_register_ops(S, &bad, 1) == TRACER_ERROR_ARGUMENT);
  CHECK(tracer_help(S, "native.scaled") && strstr(tracer_help(S, "native.scaled"), "factor") != NULL);
  tracer_op clash = {"matmul", "", "", 2, scale_type, scale_kernel, NULL}; /* a prims name */
  CHECK(tracer_register_ops(S, &clash, 1) == TRACER_ERROR_ARGUMENT);
  CHECK(strstr(tracer_last_error(S), "prims.matmul exists") != NULL);
  CHECK_OK(S, tracer_load_string(S, "ops.trace",
                                 "def f(x: f32[4]):\n    return native.scaled(x) + 1.0\n\n"
                                 "def loss(x: f32[4]):\n    return sum(native.scaled(x) * x)\n\n"
                                 "def wrong(x):\n    return native.scaled(x)\n\n"
                                 "def shown(x: f32[4]):\n    return trace(f)\n"));
  tracer_function *f = NULL, *loss = NULL, *wrong = NULL;
  CHECK_OK(S, tracer_function_get(S, "f", &f));
  CHECK_OK(S, tracer_function_get(S, "loss", &loss));
  CHECK_OK(S, tracer_function_get(S, "wrong", &wrong));
  int64_t shape[1] = {4};
  float xv[4] = {1, 2, 3, 4};
  tracer_tensor* x = NULL;
  CHECK_OK(S, tracer_tensor_new(S, TRACER_F32, 1, shape, xv, &x));
  tracer_value args[1] = {tracer_value_tensor(x)}, out[2];
  size_t n = 0;
  /* eagerly: the kernel runs at the call */
  CHECK_OK(S, tracer_call(S, f, args, 1, out, 2, &n));
  CHECK(kernel_calls == 1);
  CHECK(n == 1 && ((const float*)tracer_tensor_data(out[0].as.tensor))[3] == 13.0f);
  tracer_values_release(out, n);
  /* traced (a pass): recorded as native.scaled, run by the CPU executor with the kernel */
  CHECK_OK(S, tracer_set_passes(S, "fuse,del_last_used"));
  CHECK_OK(S, tracer_call(S, f, args, 1, out, 2, &n));
  CHECK(kernel_calls == 2);
  CHECK(n == 1 && ((const float*)tracer_tensor_data(out[0].as.tensor))[0] == 4.0f);
  tracer_values_release(out, n);
  /* grad refuses it: no gradient rule */
  CHECK_OK(S, tracer_set_passes(S, "grad"));
  CHECK(tracer_call(S, loss, args, 1, out, 2, &n) == TRACER_ERROR_SCRIPT);
  CHECK(strstr(tracer_last_error(S), "no gradient rule for native.scaled") != NULL);
  CHECK_OK(S, tracer_set_passes(S, ""));
  /* the type function refuses an i64 tensor, with the host's message at the script's line */
  tracer_tensor* xi = NULL;
  CHECK_OK(S, tracer_tensor_new(S, TRACER_I64, 1, shape, NULL, &xi));
  tracer_value iargs[1] = {tracer_value_tensor(xi)};
  CHECK(tracer_call(S, wrong, iargs, 1, out, 2, &n) == TRACER_ERROR_SCRIPT);
  CHECK(strstr(tracer_last_error(S), "takes one f32 tensor") != NULL);
  CHECK(strstr(tracer_last_error(S), "ops.trace:8:") != NULL);
  /* a printed trace names the op, and reads back */
  tracer_function* shown = NULL;
  CHECK_OK(S, tracer_function_get(S, "shown", &shown));
  CHECK(tracer_call(S, shown, args, 1, out, 2, &n) == TRACER_ERROR_TYPE); /* a trace is no C value */
  CHECK(strstr(tracer_last_error(S), "trace") != NULL);
  CHECK_OK(S, tracer_load_string(S, "printed.trace",
                                 "def f(x):\n  # x: \"cpu f32[4]\"\n  t0 = native.scaled(x)  # t0: \"cpu f32[4]\"\n  return t0\n"));
  tracer_function* g = NULL;
  CHECK_OK(S, tracer_function_get(S, "f", &g));
  CHECK_OK(S, tracer_call(S, g, args, 1, out, 2, &n));
  CHECK(n == 1 && ((const float*)tracer_tensor_data(out[0].as.tensor))[1] == 6.0f);
  tracer_values_release(out, n);
  tracer_function_release(g);
  tracer_function_release(shown);
  tracer_function_release(f);
  tracer_function_release(loss);
  tracer_function_release(wrong);
  tracer_tensor_release(x);
  tracer_tensor_release(xi);
  tracer_close(S);
}

/* Two states in one process: independent modules, values and diagnostics. */
void test_two_states(void) {
  tracer_state *A = NULL, *B = NULL;
  CHECK_OK(A, tracer_open(NULL, &A));
  CHECK_OK(B, tracer_open(NULL, &B));
  CHECK_OK(A, tracer_set_global(A, "K", "2"));
  CHECK_OK(A, tracer_load_string(A, "a.trace", "K = 1\ndef f(x):\n    return x * K\n"));
  CHECK_OK(B, tracer_load_string(B, "b.trace", "def f(x):\n    return x + 100.0\n"));
  CHECK(tracer_load_string(B, "c.trace", "def g(:\n") == TRACER_ERROR_SCRIPT);
  CHECK(tracer_diagnostic_count(A) == 0);
  tracer_function *fa = NULL, *fb = NULL;
  CHECK_OK(A, tracer_function_get(A, "f", &fa));
  CHECK_OK(B, tracer_function_get(B, "f", &fb));
  int64_t s[1] = {2};
  float v[2] = {1, 2};
  tracer_tensor* t = NULL;
  CHECK_OK(A, tracer_tensor_new(A, TRACER_F32, 1, s, v, &t));
  tracer_value args[1] = {tracer_value_tensor(t)}, out[1];
  size_t n = 0;
  CHECK_OK(A, tracer_call(A, fa, args, 1, out, 1, &n));
  CHECK(((const float*)tracer_tensor_data(out[0].as.tensor))[1] == 4.0f);
  tracer_values_release(out, n);
  /* A's function called through B is refused */
  CHECK(tracer_call(B, fa, args, 1, out, 1, &n) == TRACER_ERROR_ARGUMENT);
  /* a tensor of A's passes to B's function (tensors are plain data) */
  CHECK_OK(B, tracer_call(B, fb, args, 1, out, 1, &n));
  CHECK(((const float*)tracer_tensor_data(out[0].as.tensor))[0] == 101.0f);
  /* B closes first; its result tensor stays readable until released */
  tracer_function_release(fb);
  tracer_close(B);
  CHECK(((const float*)tracer_tensor_data(out[0].as.tensor))[0] == 101.0f);
  tracer_values_release(out, n);
  tracer_function_release(fa);
  tracer_tensor_release(t);
  tracer_close(A);
}

/* Handles released after their state was closed. */
void test_release_after_close(void) {
  tracer_state* S = NULL;
  CHECK_OK(S, tracer_open(NULL, &S));
  CHECK_OK(S, tracer_load_string(S, "m.trace", "def f(x):\n    return x\n"));
  tracer_function* f = NULL;
  CHECK_OK(S, tracer_function_get(S, "f", &f));
  int64_t s[1] = {4};
  tracer_tensor* t = NULL;
  CHECK_OK(S, tracer_tensor_new(S, TRACER_I64, 1, s, NULL, &t));
  CHECK(((const int64_t*)tracer_tensor_data(t))[3] == 0);
  tracer_close(S);
  CHECK(tracer_tensor_numel(t) == 4);
  tracer_tensor_release(t);
  tracer_function_release(f);
}

/* The memory limit from the config: a tensor or a list past it is a clear error, not the
 * machine's memory; a config from 0.1's header (ending at user) gets the default limit. */
void test_memory_limit(void) {
  tracer_state* S = NULL;
  tracer_config cfg;
  tracer_config_init(&cfg);
  CHECK(cfg.memory_limit == 0);
  cfg.memory_limit = 1u << 20; /* 1 MiB */
  CHECK_OK(S, tracer_open(&cfg, &S));
  CHECK_OK(S, tracer_load_string(S, "m.trace",
                                 "def big():\n    return full((1024, 1024), 1.0)\n"
                                 "def small():\n    return full((16, 16), 1.0)\n"
                                 "def items():\n    return len([0] * 1000000)\n"));
  tracer_function *big = NULL, *small = NULL, *items = NULL;
  CHECK_OK(S, tracer_function_get(S, "big", &big));
  CHECK_OK(S, tracer_function_get(S, "small", &small));
  CHECK_OK(S, tracer_function_get(S, "items", &items));
  tracer_value out[1];
  size_t n = 0;
  tracer_status st = tracer_call(S, big, NULL, 0, out, 1, &n);
  CHECK(st == TRACER_ERROR_MEMORY || st == TRACER_ERROR_SCRIPT);
  CHECK(strstr(tracer_diagnostics_rendered(S), "the limit of 1.00 MiB") != NULL);
  tracer_clear_diagnostics(S);
  CHECK_OK(S, tracer_call(S, small, NULL, 0, out, 1, &n));
  tracer_values_release(out, n);
  CHECK(tracer_call(S, items, NULL, 0, out, 1, &n) == TRACER_ERROR_SCRIPT);
  CHECK(strstr(tracer_diagnostics_rendered(S), "is more than the memory limit (1.00 MiB") != NULL);
  tracer_function_release(big);
  tracer_function_release(small);
  tracer_function_release(items);
  tracer_close(S);
  /* 0.1's config: the field after user is not read (here it holds garbage) */
  tracer_config old;
  tracer_config_init(&old);
  old.api_version = 100;
  old.memory_limit = 1; /* one byte: would refuse everything if it were read */
  CHECK_OK(S, tracer_open(&old, &S));
  CHECK_OK(S, tracer_load_string(S, "m.trace", "def small():\n    return full((16, 16), 1.0)\n"));
  CHECK_OK(S, tracer_function_get(S, "small", &small));
  CHECK_OK(S, tracer_call(S, small, NULL, 0, out, 1, &n));
  tracer_values_release(out, n);
  tracer_function_release(small);
  tracer_close(S);
}

/* A distributed job of one rank from torchrun's variables; no job without them; a bad RANK is
 * TRACER_ERROR_JOB naming it. */
static void join_and_leave_world_of_one(void) {
  tracer_state* S = NULL;
  CHECK_OK(S, tracer_open(NULL, &S));
  int rank = -1, world = -1;
  CHECK_OK(S, tracer_join_job(S, &rank, &world));
  CHECK(rank == 0 && world == 1);
  CHECK_OK(S, tracer_leave_job(S));
  tracer_close(S);
}

void test_job(void) {
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");
  join_and_leave_world_of_one();  /* no job */
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "1", 1);
  setenv("MASTER_PORT", "29671", 1);
  join_and_leave_world_of_one();  /* a job of one: rank 0 serves and meets itself */

  tracer_state* S = NULL;
  CHECK_OK(S, tracer_open(NULL, &S));
  setenv("RANK", "2", 1);
  CHECK(tracer_join_job(S, NULL, NULL) == TRACER_ERROR_JOB);
  CHECK(strstr(tracer_last_error(S), "RANK='2' is not a number in 0..0") != NULL);
  CHECK(strcmp(tracer_status_name(TRACER_ERROR_JOB), "job error") == 0);
  tracer_close(S);
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");
  unsetenv("MASTER_PORT");
}
