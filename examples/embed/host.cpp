// Embedding tracer from C++ (tracer.hpp over the C API): load a .trace file, register a native
// function, run with tensors the host owns, read the outputs back, and catch a script error
// with its diagnostics. Usage: host_cpp MODEL.trace
#include <cmath>
#include <cstdio>
#include <vector>

#include <tracer/tracer.hpp>

// host_clip(x, limit): clamps an f32 tensor to [-limit, limit].
static tracer_status host_clip(tracer_state* S, void*, const tracer_value* args, size_t n, tracer_value* result) {
  if (n != 2 || args[0].kind != TRACER_TENSOR || tracer_tensor_dtype(args[0].as.tensor) != TRACER_F32)
    return tracer_native_error(S, "host_clip(x, limit) takes an f32 tensor and a number");
  double limit = args[1].kind == TRACER_FLOAT ? args[1].as.f : static_cast<double>(args[1].as.i);
  const tracer_tensor* x = args[0].as.tensor;
  tracer_tensor* y = nullptr;
  tracer_status st = tracer_tensor_new(S, TRACER_F32, tracer_tensor_ndim(x), tracer_tensor_shape(x), tracer_tensor_data(x), &y);
  if (st != TRACER_OK) return st;
  float* v = static_cast<float*>(tracer_tensor_mutable_data(y));  // ours alone until handed over
  for (int64_t i = 0; i < tracer_tensor_numel(y); ++i) v[i] = static_cast<float>(std::fmax(-limit, std::fmin(limit, v[i])));
  *result = tracer_value_tensor(y);
  return TRACER_OK;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s MODEL.trace\n", argv[0]);
    return 2;
  }
  try {
    tracer::State S;
    S.register_natives({{"host_clip", "host_clip(x: tensor, limit: float) -> tensor", "Clamps x to [-limit, limit].", host_clip, nullptr}});
    S.load_file(argv[1]);

    std::vector<float> x(8 * 16), w1(32 * 16), w2(4 * 32);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37) % 17) / 17.0f - 0.5f;
    for (size_t i = 0; i < w1.size(); ++i) w1[i] = static_cast<float>((i * 11) % 13) / 13.0f - 0.5f;
    for (size_t i = 0; i < w2.size(); ++i) w2[i] = static_cast<float>((i * 5) % 7) / 7.0f - 0.5f;
    // Borrowed: tracer reads the vectors in place.
    tracer::Tensor tx = S.borrow(TRACER_F32, {8, 16}, x.data());
    tracer::Tensor tw1 = S.borrow(TRACER_F32, {32, 16}, w1.data());
    tracer::Tensor tw2 = S.borrow(TRACER_F32, {4, 32}, w2.data());

    tracer::Function mlp = S.function("mlp");
    std::vector<tracer::Value> y = S.call(mlp, {tx, tw1, tw2});
    const tracer::Tensor& out = y.at(0).tensor();
    std::printf("mlp: output [%lld, %lld], y[0][0] = %.6f\n", static_cast<long long>(out.shape()[0]),
                static_cast<long long>(out.shape()[1]), out.data_as<float>()[0]);

    S.set_passes("grad,del_last_used");
    tracer::Function loss = S.function("loss");
    std::vector<tracer::Value> g = S.call(loss, {tx, tw1, tw2});
    std::printf("loss: %.6f and %zu gradients\n", g[0].tensor().data_as<float>()[0], g.size() - 1);
    S.set_passes("");

    // A script error arrives as tracer::Error with its diagnostics.
    bool caught = false;
    try {
      S.load_string("broken.trace", "def f(x):\n    return x +\n");
    } catch (const tracer::Error& e) {
      caught = e.status() == TRACER_ERROR_SCRIPT && !e.diagnostics().empty() && e.diagnostics()[0].line == 2;
      std::printf("caught, as expected:\n%s", e.diagnostics().empty() ? e.what() : e.diagnostics()[0].rendered.c_str());
    }
    tracer::Function clipped = S.function("clipped");  // the model is still loaded
    std::vector<tracer::Value> c = S.call(clipped, {tx});
    float mx = 0;
    for (int64_t i = 0; i < c[0].tensor().numel(); ++i) mx = std::fmax(mx, c[0].tensor().data_as<float>()[i]);
    std::printf("clipped: max %.3f\n", mx);
    bool ok = caught && g.size() == 4 && std::fabs(mx - 0.5f) < 1e-6f;
    std::printf(ok ? "host_cpp: ok\n" : "host_cpp: WRONG RESULTS\n");
    return ok ? 0 : 1;
  } catch (const tracer::Error& e) {
    std::fprintf(stderr, "tracer error (%s): %s\n", tracer_status_name(e.status()), e.what());
    return 1;
  }
}
