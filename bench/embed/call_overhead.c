/* The host's cost of one tracer_call (C API), for a function of two small tensors: eager
 * (interpreted), and traced with a pass (the cached program run again). Usage: call_overhead [N] */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <tracer/tracer.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static double per_call_us(tracer_state* S, tracer_function* f, tracer_value* args, int n) {
  tracer_value out[1];
  size_t k = 0;
  for (int i = 0; i < 100; ++i) { /* warm-up (and the traced program's first run) */
    if (tracer_call(S, f, args, 2, out, 1, &k) != TRACER_OK) {
      fprintf(stderr, "%s\n", tracer_last_error(S));
      exit(1);
    }
    tracer_values_release(out, k);
  }
  double t0 = now();
  for (int i = 0; i < n; ++i) {
    tracer_call(S, f, args, 2, out, 1, &k);
    tracer_values_release(out, k);
  }
  return (now() - t0) / n * 1e6;
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 20000;
  tracer_state* S;
  if (tracer_open(NULL, &S) != TRACER_OK) return 1;
  if (tracer_load_string(S, "m.trace", "def f(x: f32[16], w: f32[16]):\n    return x * w + 1.0\n") != TRACER_OK) return 1;
  tracer_function* f;
  tracer_function_get(S, "f", &f);
  int64_t shape[1] = {16};
  float data[16] = {0};
  tracer_tensor *x, *w;
  tracer_tensor_borrow(S, TRACER_F32, 1, shape, data, NULL, NULL, &x);
  tracer_tensor_borrow(S, TRACER_F32, 1, shape, data, NULL, NULL, &w);
  tracer_value args[2] = {tracer_value_tensor(x), tracer_value_tensor(w)};
  double eager = per_call_us(S, f, args, n);
  tracer_set_passes(S, "del_last_used");
  double traced = per_call_us(S, f, args, n);
  printf("tracer_call, f32[16] x * w + 1.0: eager %.2f us, traced (cached, del_last_used) %.2f us per call\n", eager, traced);
  tracer_tensor_release(x);
  tracer_tensor_release(w);
  tracer_function_release(f);
  tracer_close(S);
  return 0;
}
