// cuDNN's fused attention (runtime/cudnn.h) on cuda:0 against the CPU's attention in f32 on the
// same bf16/f16 values (tests/gpu/run.sh runs it; label gpu): forward output and log-sum-exp,
// backward dq, dk and dv, over dtypes, causal and not, head sizes 64, 128 and 256, query and
// key lengths that differ and are no multiple of 128, and three layouts:
//   packed   every tensor a contiguous [b, h, s, d];
//   qkv      q, k and v read out of one [b, s, 3, h, d] buffer (a fused qkv projection), the
//            output and its gradient [b, s, h, d] (merged heads), dq, dk and dv written into
//            one [b, s, 3, h, d] buffer;
//   bshd     every tensor [b, s, h, d];
//   mixv     q, k and their gradients packed, v and dv [b, s, h, d];
//   qkv_packed_o  as qkv, but the output and its gradient packed.
// A case cuDNN reports unsupported (by version or shape) is listed with the reason, and counts
// as a failure only where this cuDNN should have had an engine. Exit status 0 when all agree.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <unistd.h>
#include <string>
#include <vector>

#include "runtime/cuda.h"
#include "runtime/cudnn.h"
#include "runtime/kernels.h"
#include "runtime/tensor.h"

using namespace tracer::rt;
using cuda::AttentionProblem;

namespace {

struct Case {
  DType dt;
  bool causal;
  int64_t b, h, sq, skv, d;
  const char* layout;  // packed, qkv, bshd, mixv, qkv_packed_o
  bool probe = false;  // a measurement of cuDNN (a layout the executor does not use): printed, not counted
};

uint32_t rng_state = 12345;
float uniform() {
  rng_state = rng_state * 1664525u + 1013904223u;
  return static_cast<float>(rng_state >> 8) / 8388608.0f - 1.0f;
}

uint16_t to16(DType dt, float f) { return dt == DType::bf16 ? float_to_bf16(f) : float_to_half(f); }
float from16(DType dt, uint16_t h) { return dt == DType::bf16 ? bf16_to_float(h) : half_to_float(h); }

// A tensor [b, h, s, d] laid out in a host buffer of 16-bit values by strides, from an offset.
struct View {
  int64_t offset = 0;
  AttentionProblem::Strides st{};
  size_t at(int64_t i, int64_t j, int64_t k, int64_t l) const {
    return static_cast<size_t>(offset + i * st[0] + j * st[1] + k * st[2] + l * st[3]);
  }
};

// Values of [b, h, s, d] drawn (rounded to dt), written into buf through v, and returned as an
// f32 tensor for the reference.
Tensor fill(DType dt, std::vector<uint16_t>& buf, const View& v, int64_t b, int64_t h, int64_t s, int64_t d, float amp) {
  Tensor t = Tensor::empty(DType::f32, {b, h, s, d});
  float* p = t.data_as<float>();
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < h; ++j)
      for (int64_t k = 0; k < s; ++k)
        for (int64_t l = 0; l < d; ++l) {
          uint16_t x = to16(dt, amp * uniform());
          buf[v.at(i, j, k, l)] = x;
          *p++ = from16(dt, x);
        }
  return t;
}

// max |got - ref| / max |ref| over [b, h, s, d] read through v.
double error(DType dt, const std::vector<uint16_t>& buf, const View& v, const Tensor& ref) {
  const Shape& sh = ref.shape();
  const float* r = ref.data_as<float>();
  double worst = 0, scale = 0;
  for (int64_t i = 0; i < sh[0]; ++i)
    for (int64_t j = 0; j < sh[1]; ++j)
      for (int64_t k = 0; k < sh[2]; ++k)
        for (int64_t l = 0; l < sh[3]; ++l) {
          double want = *r++, got = from16(dt, buf[v.at(i, j, k, l)]);
          if (!std::isfinite(got)) return INFINITY;
          worst = std::max(worst, std::fabs(got - want));
          scale = std::max(scale, std::fabs(want));
        }
  return scale > 0 ? worst / scale : worst;
}

struct Layout {
  View q, k, v, o, dq, dk, dv;
  size_t in_elems = 0, out_elems = 0, grad_elems = 0;  // the q/k/v buffer, the o/dO buffers, the dq/dk/dv buffer
  bool shared_in = false;                               // q, k and v in one buffer (qkv)
};

Layout layout_for(const Case& c) {
  Layout L;
  const int64_t b = c.b, h = c.h, sq = c.sq, skv = c.skv, d = c.d;
  std::string name = c.layout;
  if (name == "qkv" || name == "qkv_packed_o") {  // sq == skv
    AttentionProblem::Strides st = {sq * 3 * h * d, d, 3 * h * d, 1};
    L.q = {0, st};
    L.k = {h * d, st};
    L.v = {2 * h * d, st};
    L.dq = L.q;
    L.dk = L.k;
    L.dv = L.v;
    L.o = {0, name == "qkv" ? AttentionProblem::Strides{sq * h * d, d, h * d, 1} : AttentionProblem::packed(h, sq, d)};
    L.in_elems = L.grad_elems = static_cast<size_t>(b * sq * 3 * h * d);
    L.out_elems = static_cast<size_t>(b * sq * h * d);
    L.shared_in = true;
    return L;
  }
  auto strides = [&](int64_t s) -> AttentionProblem::Strides {
    return name == "bshd" ? AttentionProblem::Strides{s * h * d, d, h * d, 1} : AttentionProblem::packed(h, s, d);
  };
  auto bshd = [&](int64_t s) { return AttentionProblem::Strides{s * h * d, d, h * d, 1}; };
  // Separate tensors, one after the other in one buffer (offsets keep 16-byte alignment).
  const int64_t nq = b * h * sq * d, nk = b * h * skv * d;
  L.q = {0, strides(sq)};
  L.k = {nq, strides(skv)};
  L.v = {nq + nk, strides(skv)};
  if (name == "mixv") L.v.st = bshd(skv);
  L.dq = L.q;
  L.dk = L.k;
  L.dv = L.v;
  L.o = {0, strides(sq)};
  L.in_elems = L.grad_elems = static_cast<size_t>(nq + 2 * nk);
  L.out_elems = static_cast<size_t>(nq);
  return L;
}

}  // namespace

int main() {
  std::string why;
  auto dev = cuda::Device::open(0, &why);
  if (!dev) {
    std::printf("FAIL no GPU: %s\n", why.c_str());
    return 1;
  }
  auto dnn = cuda::Cudnn::open(*dev, "", &why);
  if (!dnn) {
    std::printf("FAIL cuDNN: %s\n", why.c_str());
    return 1;
  }
  std::printf("cuDNN %s (%s) on %s\n", dnn->version_string().c_str(), dnn->library().c_str(), dev->name().c_str());
  std::vector<Case> cases;
  for (DType dt : {DType::bf16, DType::f16})
    for (bool causal : {true, false}) {
      cases.push_back({dt, causal, 2, 4, 256, 256, 64, "packed"});
      cases.push_back({dt, causal, 2, 3, 256, 256, 128, "qkv"});
      cases.push_back({dt, causal, 1, 2, 128, 384, 256, "bshd"});
      cases.push_back({dt, causal, 2, 2, 200, 200, 64, "qkv"});     // no multiple of 128
      cases.push_back({dt, causal, 1, 3, 77, 333, 128, "packed"});  // neither
    }
  cases.push_back({DType::bf16, true, 3, 5, 1000, 1000, 64, "qkv"});
  // Layouts mixed: q and k packed, v [b, s, h, d]; and a head size of 24.
  cases.push_back({DType::bf16, true, 2, 3, 40, 40, 24, "mixv"});
  cases.push_back({DType::bf16, true, 2, 4, 256, 256, 64, "mixv"});
  cases.push_back({DType::bf16, true, 2, 3, 256, 256, 24, "qkv"});
  cases.push_back({DType::bf16, true, 2, 3, 40, 40, 24, "packed"});
  // q, k and v out of one qkv buffer, the output and its gradient packed (the GPT's forward).
  cases.push_back({DType::bf16, true, 2, 4, 64, 64, 32, "qkv_packed_o", true});
  cases.push_back({DType::bf16, true, 2, 3, 256, 256, 64, "qkv_packed_o", true});
  int failures = 0, ran = 0, skipped = 0;
  for (const Case& c : cases) {
    const Layout L = layout_for(c);
    AttentionProblem p;
    p.dtype = c.dt;
    p.b = c.b;
    p.h = c.h;
    p.s_q = c.sq;
    p.s_kv = c.skv;
    p.d = p.d_v = c.d;
    p.q = L.q.st;
    p.k = L.k.st;
    p.v = L.v.st;
    p.o = p.dout = L.o.st;
    p.dq = L.dq.st;
    p.dk = L.dk.st;
    p.dv = L.dv.st;
    p.causal = c.causal;
    p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.d)));
    char label[160];
    std::snprintf(label, sizeof label, "%s %s b=%lld h=%lld sq=%lld skv=%lld d=%lld %s", dtype_name(c.dt),
                  c.causal ? "causal" : "full", static_cast<long long>(c.b), static_cast<long long>(c.h),
                  static_cast<long long>(c.sq), static_cast<long long>(c.skv), static_cast<long long>(c.d), c.layout);
    std::vector<uint16_t> in(L.in_elems), dout(L.out_elems);
    Tensor q = fill(c.dt, in, L.q, c.b, c.h, c.sq, c.d, 1.0f), k = fill(c.dt, in, L.k, c.b, c.h, c.skv, c.d, 1.0f),
           v = fill(c.dt, in, L.v, c.b, c.h, c.skv, c.d, 1.0f), g = fill(c.dt, dout, L.o, c.b, c.h, c.sq, c.d, 1.0f);
    std::vector<Tensor> fw = attention(q, k, v, c.causal, p.scale, nullptr);
    std::vector<Tensor> bw = attention_backward(g, q, k, v, fw[0], fw[1], c.causal, p.scale, nullptr);
    const double tol = c.dt == DType::bf16 ? 2.5e-2 : 4e-3;
    for (bool backward : {false, true}) {
      bool by_version = false;
      std::string no = dnn->unsupported(p, backward, dev->compute_major(), &by_version);
      if (!no.empty()) {
        std::printf("%s  %s %s: not run: %s\n", by_version ? "skip" : "FAIL", label, backward ? "backward" : "forward", no.c_str());
        if (by_version) {
          skipped++;
        } else {
          failures++;
        }
        continue;
      }
      cuda::Cudnn::Prepared r = dnn->prepare(p, backward);
      if (!r.error.empty()) {
        std::printf("FAIL %s %s: no plan: %s\n", label, backward ? "backward" : "forward", r.error.c_str());
        failures++;
        continue;
      }
      if (r.built && ran < 2) std::printf("plan of %s %s: %.300s\n", label, backward ? "backward" : "forward", dnn->describe(p, backward).c_str());
      cuda::Buffer din(dev.get(), L.in_elems * 2), dgo(dev.get(), L.out_elems * 2), o(dev.get(), L.out_elems * 2);
      cuda::Buffer stats(dev.get(), static_cast<size_t>(c.b * c.h * c.sq) * 4);
      cuda::Buffer ws(dev.get(), dnn->engine_workspace(p, backward));
      dev->copy_to_device(din.ptr, in.data(), in.size() * 2);
      // The forward (the backward's o and stats too).
      const cuda::DevPtr base = din.ptr;
      auto at = [&](cuda::DevPtr b0, const View& w) { return b0 + static_cast<cuda::DevPtr>(w.offset) * 2; };
      if (!backward) {
        dnn->forward(p, at(base, L.q), at(base, L.k), at(base, L.v), o.ptr, stats.ptr, ws.ptr);
        std::vector<uint16_t> out(L.out_elems);
        std::vector<float> lse(static_cast<size_t>(c.b * c.h * c.sq));
        dev->copy_to_host(out.data(), o.ptr, out.size() * 2);
        dev->copy_to_host(lse.data(), stats.ptr, lse.size() * 4);
        double eo = error(c.dt, out, L.o, fw[0]), el = 0;
        const float* rl = fw[1].data_as<float>();
        for (size_t i = 0; i < lse.size(); ++i) el = std::max(el, static_cast<double>(std::fabs(lse[i] - rl[i])));
        bool ok = eo <= tol && el <= 2e-3;
        std::printf("%s %s forward: out %.2e, lse %.2e (plan %s %.0f ms, workspace %zu)\n", c.probe ? (ok ? "probe ok  " : "probe FAIL") : ok ? "ok  " : "FAIL", label, eo, el,
                    r.built ? "built" : "cached", r.ms, dnn->engine_workspace(p, false));
        failures += !ok && !c.probe;
        ran++;
        continue;
      }
      // The backward over the CPU's forward output and log-sum-exp (so that only it is tested).
      std::vector<uint16_t> o16(L.out_elems);
      {
        const float* ro = fw[0].data_as<float>();
        for (int64_t i = 0; i < c.b; ++i)
          for (int64_t j = 0; j < c.h; ++j)
            for (int64_t s = 0; s < c.sq; ++s)
              for (int64_t l = 0; l < c.d; ++l) o16[L.o.at(i, j, s, l)] = to16(c.dt, *ro++);
      }
      dev->copy_to_device(o.ptr, o16.data(), o16.size() * 2);
      dev->copy_to_device(dgo.ptr, dout.data(), dout.size() * 2);
      dev->copy_to_device(stats.ptr, fw[1].data(), fw[1].nbytes());
      cuda::Buffer grads(dev.get(), L.grad_elems * 2), rows(dev.get(), static_cast<size_t>(c.b * c.h * c.sq) * 4),
          acc(dev.get(), static_cast<size_t>(c.b * c.h * c.sq * c.d) * 4);
      dnn->backward(p, at(base, L.q), at(base, L.k), at(base, L.v), o.ptr, dgo.ptr, stats.ptr, at(grads.ptr, L.dq),
                    at(grads.ptr, L.dk), at(grads.ptr, L.dv), rows.ptr, acc.ptr, ws.ptr);
      std::vector<uint16_t> gr(L.grad_elems);
      dev->copy_to_host(gr.data(), grads.ptr, gr.size() * 2);
      double eq = error(c.dt, gr, L.dq, bw[0]), ek = error(c.dt, gr, L.dk, bw[1]), ev = error(c.dt, gr, L.dv, bw[2]);
      bool ok = eq <= tol && ek <= tol && ev <= tol;
      std::printf("%s %s backward: dq %.2e, dk %.2e, dv %.2e (plan %s %.0f ms, workspace %zu)\n", c.probe ? (ok ? "probe ok  " : "probe FAIL") : ok ? "ok  " : "FAIL", label, eq,
                  ek, ev, r.built ? "built" : "cached", r.ms, dnn->engine_workspace(p, true));
      failures += !ok && !c.probe;
      ran++;
    }
  }
  // A second prepare of a seen problem builds nothing.
  AttentionProblem again = AttentionProblem::contiguous(DType::bf16, 2, 4, 256, 256, 64, 64, true, 0.125f);
  dnn->prepare(again, false);
  cuda::Cudnn::Prepared second = dnn->prepare(again, false);
  if (second.built || second.loaded || !second.error.empty()) {
    std::printf("FAIL a second prepare of the same problem built again\n");
    failures++;
  }
  // Plans kept on disk: a second Cudnn over the same folder reads them instead of building.
  {
    char dir[] = "/tmp/tracer-cudnn-plans-XXXXXX";
    if (!mkdtemp(dir)) {
      std::printf("FAIL no temporary folder\n");
      return 1;
    }
    AttentionProblem p = AttentionProblem::contiguous(DType::bf16, 2, 3, 256, 256, 64, 64, true, 0.125f);
    double ms[2][2] = {{0, 0}, {0, 0}};
    bool loaded[2][2] = {{false, false}, {false, false}};
    for (int round = 0; round < 2; ++round) {
      auto d2 = cuda::Cudnn::open(*dev, dir, &why);
      for (int bw = 0; bw < 2; ++bw) {
        cuda::Cudnn::Prepared r = d2->prepare(p, bw == 1);
        ms[round][bw] = r.ms;
        loaded[round][bw] = r.loaded;
        if (!r.error.empty()) std::printf("FAIL plan cache round %d: %s\n", round, r.error.c_str());
      }
      if (round == 1 && !d2->load_error().empty()) std::printf("     %s\n", d2->load_error().c_str());
    }
    bool ok = loaded[1][0] && loaded[1][1] && !loaded[0][0];
    std::printf("%s plans kept on disk: built in %.0f + %.0f ms, read back in %.0f + %.0f ms\n", ok ? "ok  " : "FAIL", ms[0][0],
                ms[0][1], ms[1][0], ms[1][1]);
    failures += !ok;
    std::filesystem::remove_all(dir);
  }
  std::printf("%s: %d ran, %d skipped by version, %d failed\n", failures ? "CUDNN ATTENTION FAILED" : "CUDNN ATTENTION PASSED", ran,
              skipped, failures);
  return failures ? 1 : 0;
}
