/* Embedding tracer from C: load a .trace file, register a native function, run with tensors
 * the host owns (borrowed, no copies), read the outputs back. With a DEVICE ("cuda"), the
 * training step runs there too and must agree with the CPU. Usage: host_c MODEL.trace [DEVICE] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <tracer/tracer.h>

#define TRY(S, call)                                                                            \
  do {                                                                                          \
    tracer_status st_ = (call);                                                                 \
    if (st_ != TRACER_OK) {                                                                     \
      fprintf(stderr, "%s failed (%s):\n%s\n", #call, tracer_status_name(st_), tracer_last_error(S)); \
      exit(1);                                                                                  \
    }                                                                                           \
  } while (0)

/* host_clip(x, limit): a native function, clamps a tensor to [-limit, limit]. */
static tracer_status host_clip(tracer_state* S, void* user, const tracer_value* args, size_t n, tracer_value* result) {
  (void)user;
  if (n != 2 || args[0].kind != TRACER_TENSOR || tracer_tensor_dtype(args[0].as.tensor) != TRACER_F32 ||
      (args[1].kind != TRACER_FLOAT && args[1].kind != TRACER_INT))
    return tracer_native_error(S, "host_clip(x, limit) takes an f32 tensor and a number");
  const tracer_tensor* x = args[0].as.tensor;
  double limit = args[1].kind == TRACER_FLOAT ? args[1].as.f : (double)args[1].as.i;
  tracer_tensor* y = NULL;
  tracer_status st = tracer_tensor_new(S, TRACER_F32, tracer_tensor_ndim(x), tracer_tensor_shape(x), tracer_tensor_data(x), &y);
  if (st != TRACER_OK) return st;
  float* v = (float*)tracer_tensor_mutable_data(y); /* ours alone until handed over */
  for (int64_t i = 0; i < tracer_tensor_numel(y); ++i) v[i] = v[i] > limit ? (float)limit : v[i] < -limit ? (float)-limit : v[i];
  *result = tracer_value_tensor(y);
  return TRACER_OK;
}

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    fprintf(stderr, "usage: %s MODEL.trace [DEVICE]\n", argv[0]);
    return 2;
  }
  tracer_state* S = NULL;
  tracer_config cfg;
  tracer_config_init(&cfg);
  if (tracer_open(&cfg, &S) != TRACER_OK) return 1;
  tracer_native natives[] = {{"host_clip", "host_clip(x: tensor, limit: float) -> tensor",
                              "Clamps x to [-limit, limit] (in the host).", host_clip, NULL}};
  TRY(S, tracer_register_natives(S, natives, 1));
  TRY(S, tracer_load_file(S, argv[1]));

  /* The host's own buffers, lent to tracer. */
  enum { B = 8 };
  static float x[B * 16], w1[32 * 16], w2[4 * 32];
  for (int i = 0; i < B * 16; ++i) x[i] = (float)((i * 37) % 17) / 17.0f - 0.5f;
  for (int i = 0; i < 32 * 16; ++i) w1[i] = (float)((i * 11) % 13) / 13.0f - 0.5f;
  for (int i = 0; i < 4 * 32; ++i) w2[i] = (float)((i * 5) % 7) / 7.0f - 0.5f;
  int64_t xs[2] = {B, 16}, w1s[2] = {32, 16}, w2s[2] = {4, 32};
  tracer_tensor *tx, *tw1, *tw2;
  TRY(S, tracer_tensor_borrow(S, TRACER_F32, 2, xs, x, NULL, NULL, &tx));
  TRY(S, tracer_tensor_borrow(S, TRACER_F32, 2, w1s, w1, NULL, NULL, &tw1));
  TRY(S, tracer_tensor_borrow(S, TRACER_F32, 2, w2s, w2, NULL, NULL, &tw2));
  tracer_value args[3] = {tracer_value_tensor(tx), tracer_value_tensor(tw1), tracer_value_tensor(tw2)};

  /* Forward: look the function up once, call it. */
  tracer_function* mlp;
  TRY(S, tracer_function_get(S, "mlp", &mlp));
  tracer_value out[4];
  size_t n = 0;
  TRY(S, tracer_call(S, mlp, args, 3, out, 4, &n));
  const float* y = (const float*)tracer_tensor_data(out[0].as.tensor);
  double check = 0;
  for (int j = 0; j < 32; ++j) {
    double h = 0;
    for (int k = 0; k < 16; ++k) h += (double)x[k] * (double)w1[j * 16 + k];
    check += (h > 0 ? h : 0) * (double)w2[j];
  }
  printf("mlp: y[0][0] = %.6f (the host's own sum: %.6f)\n", y[0], check);
  int ok = fabs(y[0] - check) < 1e-4;
  tracer_values_release(out, n);

  /* Training step: the loss and a gradient per input, from the grad pass. */
  tracer_function* loss;
  TRY(S, tracer_function_get(S, "loss", &loss));
  TRY(S, tracer_set_passes(S, "grad,del_last_used"));
  TRY(S, tracer_call(S, loss, args, 3, out, 4, &n));
  const int64_t* g1 = tracer_tensor_shape(out[1].as.tensor);
  const int64_t* g2 = tracer_tensor_shape(out[2].as.tensor);
  printf("loss: %.6f; gradients of x [%lld, %lld], w1 [%lld, %lld] and w2\n", *(const float*)tracer_tensor_data(out[0].as.tensor),
         (long long)g1[0], (long long)g1[1], (long long)g2[0], (long long)g2[1]);
  ok = ok && n == 4; /* the loss and the gradients of x, w1 and w2 */
  if (argc == 3) { /* the same step on the device */
    float cpu_loss = *(const float*)tracer_tensor_data(out[0].as.tensor);
    float cpu_g = ((const float*)tracer_tensor_data(out[2].as.tensor))[5];
    tracer_values_release(out, n);
    TRY(S, tracer_set_device(S, argv[2]));
    TRY(S, tracer_call(S, loss, args, 3, out, 4, &n));
    float dev_loss = *(const float*)tracer_tensor_data(out[0].as.tensor);
    float dev_g = ((const float*)tracer_tensor_data(out[2].as.tensor))[5];
    int same = fabsf(dev_loss - cpu_loss) <= 1e-4f * fabsf(cpu_loss) && fabsf(dev_g - cpu_g) <= 1e-3f * (fabsf(cpu_g) + 1e-3f);
    printf("on %s: loss %.6f, a gradient %.6f (CPU: %.6f, %.6f): %s\n", argv[2], dev_loss, dev_g, cpu_loss, cpu_g,
           same ? "agrees" : "DIFFERS");
    ok = ok && same;
    TRY(S, tracer_set_device(S, "cpu"));
  }
  tracer_values_release(out, n);
  TRY(S, tracer_set_passes(S, ""));

  /* A script calling back into the host. */
  tracer_function* clipped;
  TRY(S, tracer_function_get(S, "clipped", &clipped));
  TRY(S, tracer_call(S, clipped, args, 1, out, 1, &n));
  const float* c = (const float*)tracer_tensor_data(out[0].as.tensor);
  float mx = 0;
  for (int64_t i = 0; i < tracer_tensor_numel(out[0].as.tensor); ++i) mx = c[i] > mx ? c[i] : mx;
  printf("clipped: max %.3f\n", mx);
  ok = ok && fabsf(mx - 0.5f) < 1e-6f; /* x reaches 0.44: clipped to 0.25, doubled */
  tracer_values_release(out, n);

  tracer_function_release(mlp);
  tracer_function_release(loss);
  tracer_function_release(clipped);
  tracer_tensor_release(tx);
  tracer_tensor_release(tw1);
  tracer_tensor_release(tw2);
  tracer_close(S);
  printf(ok ? "host_c: ok\n" : "host_c: WRONG RESULTS\n");
  return ok ? 0 : 1;
}
