/* Tests of the C API (include/tracer/tracer.h), written in C as a host would write them. Each
 * check prints what failed; the program exits 1 if any did. Run under AddressSanitizer and
 * LeakSanitizer by the sanitizer build (scripts/test.sh): every handle is released, so any leak
 * or use after free fails the run. */
#include <dlpack/dlpack.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tracer/tracer.h"
#include "capi_check.h"

int capi_failures = 0;

static const char* kModule =
    "def affine(x: f32[2, 3], w: f32[3], b: f32[3]):\n"
    "    return x * w + b\n"
    "\n"
    "def loss(x: f32[4, 3], w: f32[5, 3]):\n"
    "    return mean(linear(x, w) ** 2)\n"
    "\n"
    "def scaled(x, k):\n"
    "    return x * k, k + 1\n"
    "\n"
    "def uses_native(x):\n"
    "    return host_scale(x, 3.0) + 1.0\n"
    "\n"
    "def fails_in_native(x):\n"
    "    return host_fail(x)\n"
    "\n"
    "def spins(x):\n"
    "    host_interrupt()\n"
    "    while True:\n"
    "        x = x + 1\n"
    "    return x\n";

/* ---- output and diagnostics callbacks ---- */

static char printed[256];
static void on_output(void* user, const char* text, size_t len) {
  (void)user;
  size_t have = strlen(printed);
  if (have + len < sizeof printed) {
    memcpy(printed + have, text, len);
    printed[have + len] = 0;
  }
}
static int diagnostics_seen = 0;
static int last_diag_line = 0;
static void on_diagnostic(void* user, const tracer_diagnostic* d) {
  int* count = (int*)user;
  ++*count;
  ++diagnostics_seen;
  last_diag_line = d->line;
}

/* ---- natives ---- */

static tracer_status host_scale(tracer_state* S, void* user, const tracer_value* args, size_t n, tracer_value* result) {
  int* calls = (int*)user;
  ++*calls;
  if (n != 2 || args[0].kind != TRACER_TENSOR || args[1].kind != TRACER_FLOAT)
    return tracer_native_error(S, "host_scale(x, k) takes a tensor and a float");
  const tracer_tensor* x = args[0].as.tensor;
  if (tracer_tensor_dtype(x) != TRACER_F32) return tracer_native_error(S, "host_scale wants f32");
  int64_t numel = tracer_tensor_numel(x);
  float* tmp = (float*)malloc(sizeof(float) * (size_t)(numel ? numel : 1));
  const float* src = (const float*)tracer_tensor_data(x);
  for (int64_t i = 0; i < numel; ++i) tmp[i] = src[i] * (float)args[1].as.f;
  tracer_tensor* y = NULL;
  tracer_status st = tracer_tensor_new(S, TRACER_F32, tracer_tensor_ndim(x), tracer_tensor_shape(x), tmp, &y);
  free(tmp);
  if (st != TRACER_OK) return st;
  *result = tracer_value_tensor(y);
  return TRACER_OK;
}

static tracer_status host_interrupt(tracer_state* S, void* user, const tracer_value* args, size_t n, tracer_value* result) {
  (void)user, (void)args, (void)n, (void)result;
  tracer_interrupt(S); /* as a signal handler or another thread would */
  return TRACER_OK;
}

static tracer_status host_fail(tracer_state* S, void* user, const tracer_value* args, size_t n, tracer_value* result) {
  (void)user, (void)args, (void)n, (void)result;
  return tracer_native_error(S, "the host refused");
}

/* ---- allocation hooks: count what tensor storage takes and gives back ---- */

typedef struct {
  long allocs, frees;
  size_t live;
} AllocCount;
static void* count_alloc(void* user, size_t size, size_t align) {
  AllocCount* c = (AllocCount*)user;
  void* p = NULL;
  if (posix_memalign(&p, align < sizeof(void*) ? sizeof(void*) : align, size) != 0) return NULL;
  ++c->allocs;
  c->live += size;
  return p;
}
static void count_free(void* user, void* p, size_t size) {
  AllocCount* c = (AllocCount*)user;
  ++c->frees;
  c->live -= size;
  free(p);
}

static int borrowed_released = 0;
static void release_borrowed(void* ctx) {
  CHECK(ctx == (void*)&borrowed_released);
  ++borrowed_released;
}


static void test_open_and_version(void) {
  tracer_state* S = NULL;
  tracer_config cfg;
  tracer_config_init(&cfg);
  CHECK(cfg.api_version == TRACER_API_VERSION);
  CHECK(tracer_version() / 10000 == TRACER_VERSION_MAJOR);
  cfg.api_version = (TRACER_VERSION_MAJOR + 1) * 10000;
  CHECK(tracer_open(&cfg, &S) == TRACER_ERROR_VERSION);
  CHECK(S == NULL);
  tracer_config_init(&cfg);
  cfg.alloc = count_alloc; /* alloc without free */
  CHECK(tracer_open(&cfg, &S) == TRACER_ERROR_ARGUMENT);
  CHECK(tracer_open(NULL, NULL) == TRACER_ERROR_ARGUMENT);
  CHECK_OK(S, tracer_open(NULL, &S));
  CHECK(S != NULL);
  tracer_close(S);
  tracer_close(NULL);
}

static void test_null_handles(void) {
  tracer_tensor* t = NULL;
  tracer_function* f = NULL;
  int64_t shape[1] = {3};
  size_t n = 0;
  CHECK(tracer_load_string(NULL, "m", kModule) == TRACER_ERROR_ARGUMENT);
  CHECK(tracer_tensor_new(NULL, TRACER_F32, 1, shape, NULL, &t) == TRACER_ERROR_ARGUMENT);
  CHECK(tracer_function_get(NULL, "affine", &f) == TRACER_ERROR_ARGUMENT);
  CHECK(tracer_call(NULL, NULL, NULL, 0, NULL, 0, &n) == TRACER_ERROR_ARGUMENT);
  CHECK(tracer_tensor_ndim(NULL) == 0);
  CHECK(tracer_tensor_data(NULL) == NULL);
  tracer_tensor_release(NULL);
  tracer_function_release(NULL);
  tracer_values_release(NULL, 3);
  CHECK(strcmp(tracer_last_error(NULL), "null state") == 0);

  tracer_state* S = NULL;
  CHECK_OK(S, tracer_open(NULL, &S));
  CHECK(tracer_tensor_new(S, (tracer_dtype)99, 1, shape, NULL, &t) == TRACER_ERROR_ARGUMENT);
  CHECK(strstr(tracer_last_error(S), "unknown dtype") != NULL);
  int64_t bad[1] = {-2};
  CHECK(tracer_tensor_new(S, TRACER_F32, 1, bad, NULL, &t) == TRACER_ERROR_ARGUMENT);
  CHECK(tracer_tensor_new(S, TRACER_F32, 1, NULL, NULL, &t) == TRACER_ERROR_ARGUMENT);
  CHECK(tracer_call(S, NULL, NULL, 0, NULL, 0, &n) == TRACER_ERROR_ARGUMENT);
  CHECK(tracer_function_get(S, "affine", &f) == TRACER_ERROR_NOT_FOUND); /* nothing loaded */
  CHECK(tracer_load_file(S, "/nonexistent/file.trace") == TRACER_ERROR_NOT_FOUND);
  CHECK(tracer_set_device(S, "tpu") == TRACER_ERROR_ARGUMENT);
  CHECK(tracer_set_passes(S, "grad,no_such_pass") == TRACER_ERROR_NOT_FOUND);
  /* an order the passes refuse, up front, naming both */
  CHECK(tracer_set_passes(S, "del_last_used, grad") == TRACER_ERROR_ARGUMENT);
  CHECK(strstr(tracer_last_error(S), "'grad' must run before 'del_last_used'") != NULL);
  tracer_close(S);
}

static void test_errors_as_diagnostics(void) {
  tracer_state* S = NULL;
  tracer_config cfg;
  int count = 0;
  tracer_config_init(&cfg);
  cfg.diagnostic = on_diagnostic;
  cfg.user = &count;
  CHECK_OK(S, tracer_open(&cfg, &S));
  CHECK(tracer_load_string(S, "broken.trace", "def f(x):\n    return x +\n") == TRACER_ERROR_SCRIPT);
  CHECK(count >= 1);
  CHECK(tracer_diagnostic_count(S) >= 1);
  tracer_diagnostic d;
  CHECK_OK(S, tracer_diagnostic_get(S, 0, &d));
  CHECK(d.severity == TRACER_SEVERITY_ERROR);
  CHECK(strcmp(d.file, "broken.trace") == 0);
  CHECK(d.line == 2);
  CHECK(last_diag_line == 2);
  CHECK(d.column > 0);
  CHECK(strstr(d.rendered, "broken.trace:2:") != NULL);
  CHECK(strstr(tracer_diagnostics_rendered(S), "error:") != NULL);
  CHECK(strstr(tracer_last_error(S), "broken.trace:2:") != NULL);
  CHECK(tracer_diagnostic_get(S, 1000, &d) == TRACER_ERROR_ARGUMENT);
  tracer_clear_diagnostics(S);
  CHECK(tracer_diagnostic_count(S) == 0);
  CHECK(strcmp(tracer_diagnostics_rendered(S), "") == 0);

  /* A runtime error: the call fails with a diagnostic at the script's line; the state goes on. */
  CHECK_OK(S, tracer_load_string(S, "rt.trace", "def g(x):\n    y = x * 2.0\n    return prims.reshape(y, (5,))\n"));
  tracer_function* g = NULL;
  CHECK_OK(S, tracer_function_get(S, "g", &g));
  int64_t shape[1] = {2};
  tracer_tensor* t = NULL;
  CHECK_OK(S, tracer_tensor_new(S, TRACER_F32, 1, shape, NULL, &t));
  tracer_value args[1] = {tracer_value_tensor(t)}, out[1];
  size_t n = 7;
  int before = count;
  CHECK(tracer_call(S, g, args, 1, out, 1, &n) == TRACER_ERROR_SCRIPT);
  CHECK(n == 0);
  CHECK(count > before);
  CHECK(last_diag_line == 3);
  CHECK(strstr(tracer_last_error(S), "rt.trace:3:") != NULL);
  /* a module that fails to load leaves the previous one: g is still there */
  CHECK(tracer_load_string(S, "broken2.trace", "def (\n") == TRACER_ERROR_SCRIPT);
  tracer_function* g2 = NULL;
  CHECK_OK(S, tracer_function_get(S, "g", &g2));
  tracer_function_release(g2);
  tracer_tensor_release(t);
  tracer_function_release(g);
  tracer_close(S);
}

static void test_eager_calls_and_natives(void) {
  tracer_state* S = NULL;
  tracer_config cfg;
  AllocCount ac = {0, 0, 0};
  tracer_config_init(&cfg);
  cfg.output = on_output;
  cfg.alloc = count_alloc;
  cfg.free = count_free;
  cfg.user = &ac;
  CHECK_OK(S, tracer_open(&cfg, &S));
  int scale_calls = 0;
  tracer_native natives[3] = {
      {"host_scale", "host_scale(x: tensor, k: float) -> tensor", "Multiplies x by k, in the host.", host_scale, &scale_calls},
      {"host_fail", "host_fail(x) -> never", "Always fails.", host_fail, NULL},
      {"host_interrupt", "host_interrupt()", "Interrupts the running script.", host_interrupt, NULL},
  };
  CHECK_OK(S, tracer_register_natives(S, natives, 3));
  tracer_native bad = {"not an identifier", "", "", host_fail, NULL};
  CHECK(tracer_register_natives(S, &bad, 1) == TRACER_ERROR_ARGUMENT);
  CHECK_OK(S, tracer_load_string(S, "m.trace", kModule));
  /* help: a native's signature and doc, an op's doc, nothing for an unknown name */
  CHECK(tracer_help(S, "host_scale") && strstr(tracer_help(S, "host_scale"), "Multiplies x by k") != NULL);
  CHECK(tracer_help(S, "prims.add") && strstr(tracer_help(S, "prims.add"), "Elementwise") != NULL);
  CHECK(tracer_help(S, "no_such_name_here") == NULL);
  CHECK_OK(S, tracer_load_string(S, "p.trace", "print('hello from the script')\n"));
  CHECK(strstr(printed, "hello from the script") != NULL);
  CHECK_OK(S, tracer_load_string(S, "m.trace", kModule));

  tracer_function *affine = NULL, *scaled = NULL, *native = NULL, *fails = NULL, *missing = NULL;
  CHECK_OK(S, tracer_function_get(S, "affine", &affine));
  CHECK_OK(S, tracer_function_get(S, "scaled", &scaled));
  CHECK_OK(S, tracer_function_get(S, "uses_native", &native));
  CHECK_OK(S, tracer_function_get(S, "fails_in_native", &fails));
  tracer_function* spins = NULL;
  CHECK_OK(S, tracer_function_get(S, "spins", &spins));
  CHECK(tracer_function_get(S, "nope", &missing) == TRACER_ERROR_NOT_FOUND);
  CHECK(missing == NULL);

  int64_t xs[2] = {2, 3}, ws[1] = {3};
  float x[6] = {1, 2, 3, 4, 5, 6}, w[3] = {1, 10, 100}, b[3] = {0.5f, 0.5f, 0.5f};
  tracer_tensor *tx = NULL, *tw = NULL, *tb = NULL;
  CHECK_OK(S, tracer_tensor_new(S, TRACER_F32, 2, xs, x, &tx));
  CHECK_OK(S, tracer_tensor_new(S, TRACER_F32, 1, ws, w, &tw));
  /* b borrowed: no copy; released when the last reference goes */
  CHECK_OK(S, tracer_tensor_borrow(S, TRACER_F32, 1, ws, b, release_borrowed, &borrowed_released, &tb));
  CHECK(tracer_tensor_data(tb) == (const void*)b);
  CHECK(tracer_tensor_mutable_data(tb) == NULL); /* borrowed: the host writes its own memory */
  CHECK(tracer_tensor_mutable_data(tx) == tracer_tensor_data(tx));
  tracer_tensor_retain(tx);
  CHECK(tracer_tensor_mutable_data(tx) == NULL); /* two references: others may read it */
  tracer_tensor_release(tx);
  CHECK(ac.allocs >= 2); /* the two copies came from the hooks */

  tracer_value args[3] = {tracer_value_tensor(tx), tracer_value_tensor(tw), tracer_value_tensor(tb)};
  tracer_value out[4];
  size_t n = 0;
  /* Call many times: the same function handle. */
  for (int rep = 0; rep < 3; ++rep) {
    CHECK_OK(S, tracer_call(S, affine, args, 3, out, 4, &n));
    CHECK(n == 1);
    CHECK(out[0].kind == TRACER_TENSOR);
    const float* y = (const float*)tracer_tensor_data(out[0].as.tensor);
    CHECK(tracer_tensor_ndim(out[0].as.tensor) == 2 && tracer_tensor_shape(out[0].as.tensor)[1] == 3);
    CHECK(fabsf(y[0] - 1.5f) < 1e-6f && fabsf(y[4] - 50.5f) < 1e-6f && fabsf(y[5] - 600.5f) < 1e-6f);
    tracer_values_release(out, n);
    CHECK(out[0].kind == TRACER_NONE);
  }
  /* b is unchanged: tracer never writes into borrowed memory */
  CHECK(b[0] == 0.5f && b[2] == 0.5f);

  /* Mixed values: a tensor and an int; results flattened from a tuple. */
  tracer_value margs[2] = {tracer_value_tensor(tw), tracer_value_int(4)};
  CHECK_OK(S, tracer_call(S, scaled, margs, 2, out, 4, &n));
  CHECK(n == 2);
  CHECK(out[0].kind == TRACER_TENSOR && out[1].kind == TRACER_INT && out[1].as.i == 5);
  CHECK(((const float*)tracer_tensor_data(out[0].as.tensor))[1] == 40.0f);
  tracer_values_release(out, n);

  /* Too small a results array: an error, the count, nothing kept. */
  CHECK(tracer_call(S, scaled, margs, 2, out, 1, &n) == TRACER_ERROR_ARGUMENT);
  CHECK(n == 2);

  /* A native function called by a script. */
  tracer_value nargs1[1] = {tracer_value_tensor(tw)};
  CHECK_OK(S, tracer_call(S, native, nargs1, 1, out, 4, &n));
  CHECK(scale_calls == 1);
  CHECK(n == 1 && ((const float*)tracer_tensor_data(out[0].as.tensor))[2] == 301.0f);
  tracer_values_release(out, n);

  /* An error raised inside a native: a script error at the call site, with the host's message;
   * the state is usable afterwards. */
  CHECK(tracer_call(S, fails, nargs1, 1, out, 4, &n) == TRACER_ERROR_SCRIPT);
  CHECK(strstr(tracer_last_error(S), "the host refused") != NULL);
  CHECK(strstr(tracer_last_error(S), "m.trace:14:") != NULL);
  /* A native given the wrong arguments by a script. */
  CHECK_OK(S, tracer_load_string(S, "bad.trace", "def f(x):\n    return host_scale(x)\n"));
  tracer_function* f = NULL;
  CHECK_OK(S, tracer_function_get(S, "f", &f));
  CHECK(tracer_call(S, f, nargs1, 1, out, 4, &n) == TRACER_ERROR_SCRIPT);
  CHECK(strstr(tracer_last_error(S), "takes a tensor and a float") != NULL);
  tracer_function_release(f);
  /* Calling after errors: the earlier function handles still work. */
  CHECK_OK(S, tracer_call(S, affine, args, 3, out, 4, &n));
  tracer_values_release(out, n);
  /* tracer_interrupt stops an endless loop; the next call runs normally. */
  tracer_value one[1] = {tracer_value_int(1)};
  CHECK(tracer_call(S, spins, one, 1, out, 4, &n) == TRACER_ERROR_SCRIPT);
  CHECK(strstr(tracer_last_error(S), "interrupted") != NULL);
  tracer_function_release(spins);
  tracer_interrupt(S); /* a stale interrupt does not fail the next call */
  CHECK_OK(S, tracer_call(S, affine, args, 3, out, 4, &n));
  tracer_values_release(out, n);
  /* A wrong argument count is a script error with the function's own message. */
  CHECK(tracer_call(S, affine, args, 2, out, 4, &n) == TRACER_ERROR_SCRIPT);

  tracer_function_release(affine);
  tracer_function_release(scaled);
  tracer_function_release(native);
  tracer_function_release(fails);
  tracer_tensor_release(tx);
  tracer_tensor_release(tw);
  CHECK(borrowed_released == 0);
  tracer_tensor_release(tb);
  CHECK(borrowed_released == 1);
  tracer_close(S);
  CHECK(ac.allocs == ac.frees);
  CHECK(ac.live == 0);
}

static void test_traced_calls(void) {
  tracer_state* S = NULL;
  CHECK_OK(S, tracer_open(NULL, &S));
  CHECK_OK(S, tracer_load_string(S, "m.trace", kModule));
  tracer_function* loss = NULL;
  CHECK_OK(S, tracer_function_get(S, "loss", &loss));
  CHECK_OK(S, tracer_set_passes(S, "grad, del_last_used"));
  int64_t xs[2] = {4, 3}, ws[2] = {5, 3};
  float x[12], w[15];
  for (int i = 0; i < 12; ++i) x[i] = (float)(i % 5) * 0.25f;
  for (int i = 0; i < 15; ++i) w[i] = (float)(i % 7) * 0.1f - 0.3f;
  tracer_tensor *tx = NULL, *tw = NULL;
  CHECK_OK(S, tracer_tensor_new(S, TRACER_F32, 2, xs, x, &tx));
  CHECK_OK(S, tracer_tensor_new(S, TRACER_F32, 2, ws, w, &tw));
  tracer_value args[2] = {tracer_value_tensor(tx), tracer_value_tensor(tw)};
  tracer_value out[3];
  size_t n = 0;
  /* grad: the loss, then a gradient per input; the second call reuses the traced program */
  for (int rep = 0; rep < 2; ++rep) {
    CHECK_OK(S, tracer_call(S, loss, args, 2, out, 3, &n));
    CHECK(n == 3);
    CHECK(out[0].kind == TRACER_TENSOR && tracer_tensor_ndim(out[0].as.tensor) == 0);
    CHECK(out[1].kind == TRACER_TENSOR && tracer_tensor_shape(out[1].as.tensor)[0] == 4);
    CHECK(out[2].kind == TRACER_TENSOR && tracer_tensor_shape(out[2].as.tensor)[0] == 5);
    /* d loss / d x = 2/20 * (x w^T) w: check one entry by hand */
    double y[4][5];
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 5; ++j) {
        y[i][j] = 0;
        for (int k = 0; k < 3; ++k) y[i][j] += (double)x[i * 3 + k] * (double)w[j * 3 + k];
      }
    double l = 0, gx00 = 0;
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 5; ++j) l += y[i][j] * y[i][j] / 20.0;
    for (int j = 0; j < 5; ++j) gx00 += 2.0 / 20.0 * y[0][j] * (double)w[j * 3];
    CHECK(fabs(*(const float*)tracer_tensor_data(out[0].as.tensor) - l) < 1e-5);
    CHECK(fabs(((const float*)tracer_tensor_data(out[1].as.tensor))[0] - gx00) < 1e-5);
    tracer_values_release(out, n);
  }
  /* traced calls take tensors only */
  tracer_value bad[2] = {tracer_value_tensor(tx), tracer_value_int(3)};
  CHECK(tracer_call(S, loss, bad, 2, out, 3, &n) == TRACER_ERROR_TYPE);
  /* too few tensors for the function's inputs */
  CHECK(tracer_call(S, loss, args, 1, out, 3, &n) == TRACER_ERROR_ARGUMENT);
  CHECK(strstr(tracer_last_error(S), "takes 2 inputs, got 1") != NULL);
  /* a shape and a dtype the annotations do not allow */
  int64_t wrong_shape[2] = {4, 7};
  tracer_tensor *t7 = NULL, *ti = NULL;
  CHECK_OK(S, tracer_tensor_new(S, TRACER_F32, 2, wrong_shape, NULL, &t7));
  CHECK_OK(S, tracer_tensor_new(S, TRACER_I32, 2, xs, NULL, &ti));
  tracer_value wrong1[2] = {tracer_value_tensor(t7), tracer_value_tensor(tw)};
  CHECK(tracer_call(S, loss, wrong1, 2, out, 3, &n) == TRACER_ERROR_SCRIPT);
  CHECK(strstr(tracer_last_error(S), "f32[4, 7]") != NULL && strstr(tracer_last_error(S), "f32[4, 3]") != NULL);
  tracer_value wrong2[2] = {tracer_value_tensor(ti), tracer_value_tensor(tw)};
  CHECK(tracer_call(S, loss, wrong2, 2, out, 3, &n) == TRACER_ERROR_SCRIPT);
  CHECK(strstr(tracer_last_error(S), "i32[4, 3]") != NULL);
  tracer_tensor_release(t7);
  tracer_tensor_release(ti);
  /* No GPU here (or one): either way a clear status, never a crash. */
  tracer_status st = tracer_set_device(S, "cuda:7");
  CHECK(st == TRACER_OK || st == TRACER_ERROR_DEVICE);
  if (st != TRACER_OK) CHECK(strlen(tracer_last_error(S)) > 0);
  tracer_function_release(loss);
  tracer_tensor_release(tx);
  tracer_tensor_release(tw);
  tracer_close(S);
}

/* After grad, one result per input, in order: TRACER_NONE where an input has no gradient (an
 * integer input, an input nothing depends on), so the results can be indexed by position. */
static void test_gradient_positions(void) {
  tracer_state* S = NULL;
  CHECK_OK(S, tracer_open(NULL, &S));
  CHECK_OK(S, tracer_load_string(S, "g.trace",
                                 "def f(k: i64[2], x: f32[4], u: f32[3], w: f32[4]):\n"
                                 "    return sum(x * w) + sum(k)\n"));
  tracer_function* f = NULL;
  CHECK_OK(S, tracer_function_get(S, "f", &f));
  CHECK_OK(S, tracer_set_passes(S, "grad"));
  int64_t s2[1] = {2}, s3[1] = {3}, s4[1] = {4};
  int64_t k[2] = {1, 2};
  float x[4] = {1, 2, 3, 4}, u[3] = {0, 0, 0}, w[4] = {0.5f, -1, 2, 0.25f};
  tracer_tensor *tk = NULL, *tx = NULL, *tu = NULL, *tw = NULL;
  CHECK_OK(S, tracer_tensor_new(S, TRACER_I64, 1, s2, k, &tk));
  CHECK_OK(S, tracer_tensor_new(S, TRACER_F32, 1, s4, x, &tx));
  CHECK_OK(S, tracer_tensor_new(S, TRACER_F32, 1, s3, u, &tu));
  CHECK_OK(S, tracer_tensor_new(S, TRACER_F32, 1, s4, w, &tw));
  tracer_value args[4] = {tracer_value_tensor(tk), tracer_value_tensor(tx), tracer_value_tensor(tu), tracer_value_tensor(tw)};
  tracer_value out[5];
  size_t n = 0;
  CHECK_OK(S, tracer_call(S, f, args, 4, out, 5, &n));
  CHECK(n == 5);
  CHECK(out[0].kind == TRACER_TENSOR);
  CHECK(fabs(*(const float*)tracer_tensor_data(out[0].as.tensor) - (0.5 - 2 + 6 + 1 + 3)) < 1e-5);
  CHECK(out[1].kind == TRACER_NONE);                                   /* k: integers */
  CHECK(out[2].kind == TRACER_TENSOR);                                 /* x: d/dx = w */
  CHECK(((const float*)tracer_tensor_data(out[2].as.tensor))[1] == -1.0f);
  CHECK(out[3].kind == TRACER_NONE);                                   /* u: unused */
  CHECK(out[4].kind == TRACER_TENSOR);                                 /* w: d/dw = x */
  CHECK(((const float*)tracer_tensor_data(out[4].as.tensor))[3] == 4.0f);
  tracer_values_release(out, n);
  tracer_function_release(f);
  tracer_tensor_release(tk);
  tracer_tensor_release(tx);
  tracer_tensor_release(tu);
  tracer_tensor_release(tw);
  tracer_close(S);
}

/* A compiled function of the module (value_and_grad) through tracer_call: (value, gradients). */
static void test_compiled_function(void) {
  tracer_state* S = NULL;
  CHECK_OK(S, tracer_open(NULL, &S));
  CHECK_OK(S, tracer_load_string(S, "vg.trace",
                                 "def f(x, w):\n"
                                 "    return sum(x * w)\n"
                                 "step = value_and_grad(f, argnums=(0, 1))\n"));
  tracer_function* step = NULL;
  CHECK_OK(S, tracer_function_get(S, "step", &step));
  int64_t s4[1] = {4};
  float x[4] = {1, 2, 3, 4}, w[4] = {0.5f, -1, 2, 0.25f};
  tracer_tensor *tx = NULL, *tw = NULL;
  CHECK_OK(S, tracer_tensor_new(S, TRACER_F32, 1, s4, x, &tx));
  CHECK_OK(S, tracer_tensor_new(S, TRACER_F32, 1, s4, w, &tw));
  tracer_value args[2] = {tracer_value_tensor(tx), tracer_value_tensor(tw)};
  tracer_value out[3];
  size_t n = 0;
  for (int call = 0; call < 2; ++call) { /* the second call reuses the compiled program */
    CHECK_OK(S, tracer_call(S, step, args, 2, out, 3, &n));
    CHECK(n == 3);
    CHECK(fabs(*(const float*)tracer_tensor_data(out[0].as.tensor) - (0.5 - 2 + 6 + 1)) < 1e-5);
    CHECK(((const float*)tracer_tensor_data(out[1].as.tensor))[2] == 2.0f); /* d/dx = w */
    CHECK(((const float*)tracer_tensor_data(out[2].as.tensor))[3] == 4.0f); /* d/dw = x */
    tracer_values_release(out, n);
  }
  tracer_function_release(step);
  tracer_tensor_release(tx);
  tracer_tensor_release(tw);
  tracer_close(S);
}


int main(void) {
  test_open_and_version();
  test_memory_limit();
  test_null_handles();
  test_errors_as_diagnostics();
  test_eager_calls_and_natives();
  test_traced_calls();
  test_gradient_positions();
  test_compiled_function();
  test_dlpack();
  test_native_ops();
  test_two_states();
  test_release_after_close();
  test_job();
  if (capi_failures) {
    fprintf(stderr, "%d check(s) failed\n", capi_failures);
    return 1;
  }
  printf("C API tests passed\n");
  return 0;
}
