// The stdlib composites (written in the language) on every float dtype, run eagerly, against
// float64 references written independently here in C++.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>

#include "runtime/kernels.h"
#include "tests/support.h"
#include "tracer/session.h"

namespace tracer::test {
namespace {

using interp::CallArgs;
using interp::TensorObj;
using interp::Value;
using rt::DType;
using rt::Tensor;
using Vec = std::vector<double>;

// Tolerances (relative to max(1, |reference|)), documented in docs/numerics.md.
double tol(DType dt) {
  switch (dt) {
    case DType::f64: return 1e-9;
    case DType::f32: return 1e-5;
    case DType::f16: return 4e-3;
    default: return 3e-2;
  }
}

struct Fixture {
  SourceManager sm;
  interp::Interpreter in{sm};

  Tensor make(DType dt, rt::Shape s, uint64_t seed, double lo = -2, double hi = 2) {
    return rt::cast(rt::uniform_philox(s, lo, hi, DType::f64, seed, 11, nullptr), dt, nullptr);
  }
  Value call(const std::string& op, std::vector<Value> pos, std::vector<std::pair<std::string, Value>> kw = {}) {
    CallArgs a;
    a.pos = std::move(pos);
    a.kw = std::move(kw);
    return in.call_ltorch(op, std::move(a), {});
  }
};

Value T(const Tensor& t) { return interp::make<TensorObj>(t); }
Vec vals(const Tensor& t) {
  Vec v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.get(i);
  return v;
}
Vec vals(const Value& v) { return vals(v.as<TensorObj>()->t); }

void check(const Value& got, const Vec& want, DType dt, const std::string& what) {
  INFO(what << " on " << rt::dtype_name(dt));
  const Tensor& t = got.as<TensorObj>()->t;
  CHECK(t.dtype() == dt);
  Vec g = vals(t);
  REQUIRE(g.size() == want.size());
  for (size_t i = 0; i < g.size(); ++i) {
    INFO("element " << i << ": got " << g[i] << ", want " << want[i]);
    if (std::fabs(g[i] - want[i]) > tol(dt) * std::max(1.0, std::fabs(want[i]))) CHECK(g[i] == Approx(want[i]));
  }
}

// Row-wise references over the last dimension of a [rows, n] array.
Vec rows_map(const Vec& x, size_t n, const std::function<void(const double*, double*, size_t)>& f) {
  Vec out(x.size());
  for (size_t r = 0; r < x.size() / n; ++r) f(&x[r * n], &out[r * n], n);
  return out;
}

Vec softmax_ref(const Vec& x, size_t n, bool log) {
  return rows_map(x, n, [log](const double* a, double* o, size_t k) {
    double m = *std::max_element(a, a + k), s = 0;
    for (size_t i = 0; i < k; ++i) s += std::exp(a[i] - m);
    for (size_t i = 0; i < k; ++i) o[i] = log ? a[i] - m - std::log(s) : std::exp(a[i] - m) / s;
  });
}

const DType kFloats[] = {DType::f64, DType::f32, DType::f16, DType::bf16};

}  // namespace

TEST_CASE("elementwise composites match float64 references", "[composites]") {
  Fixture f;
  for (DType dt : kFloats) {
    Tensor x = f.make(dt, {5, 7}, 1);
    Vec v = vals(x);
    auto map = [&](double (*g)(double)) {
      Vec o(v.size());
      for (size_t i = 0; i < v.size(); ++i) o[i] = g(v[i]);
      return o;
    };
    check(f.call("relu", {T(x)}), map([](double a) { return a > 0 ? a : 0.0; }), dt, "relu");
    check(f.call("sigmoid", {T(x)}), map([](double a) { return 1 / (1 + std::exp(-a)); }), dt, "sigmoid");
    check(f.call("silu", {T(x)}), map([](double a) { return a / (1 + std::exp(-a)); }), dt, "silu");
    check(f.call("gelu", {T(x)}), map([](double a) { return 0.5 * a * (1 + std::erf(a / std::sqrt(2.0))); }), dt, "gelu");
    check(f.call("gelu", {T(x)}, {{"approximate", interp::str_value("tanh")}}),
          map([](double a) { return 0.5 * a * (1 + std::tanh(std::sqrt(2 / M_PI) * (a + 0.044715 * a * a * a))); }), dt,
          "gelu(tanh)");
    check(f.call("tanh", {T(x)}), map([](double a) { return std::tanh(a); }), dt, "tanh");
  }
}

TEST_CASE("softmax, log_softmax, norms, mean and var match float64 references", "[composites]") {
  Fixture f;
  for (DType dt : kFloats) {
    Tensor x = f.make(dt, {4, 9}, 2);
    Vec v = vals(x);
    check(f.call("softmax", {T(x), Value::integer(-1)}), softmax_ref(v, 9, false), dt, "softmax");
    check(f.call("log_softmax", {T(x), Value::integer(1)}), softmax_ref(v, 9, true), dt, "log_softmax");
    Tensor w = f.make(dt, {9}, 3), b = f.make(dt, {9}, 4);
    Vec wv = vals(w), bv = vals(b);
    Vec ln = rows_map(v, 9, [&](const double* a, double* o, size_t k) {
      double m = 0, s = 0;
      for (size_t i = 0; i < k; ++i) m += a[i] / k;
      for (size_t i = 0; i < k; ++i) s += (a[i] - m) * (a[i] - m) / k;
      for (size_t i = 0; i < k; ++i) o[i] = (a[i] - m) / std::sqrt(s + 1e-5) * wv[i] + bv[i];
    });
    Value shape = interp::make<interp::TupleObj>(std::vector<Value>{Value::integer(9)});
    check(f.call("layer_norm", {T(x), shape, T(w), T(b)}), ln, dt, "layer_norm");
    Vec rms = rows_map(v, 9, [&](const double* a, double* o, size_t k) {
      double s = 0;
      for (size_t i = 0; i < k; ++i) s += a[i] * a[i] / k;
      for (size_t i = 0; i < k; ++i) o[i] = a[i] / std::sqrt(s + 1e-6) * wv[i];
    });
    check(f.call("rms_norm", {T(x), shape, T(w)}), rms, dt, "rms_norm");
    double mean = 0;
    for (double a : v) mean += a / v.size();
    check(f.call("mean", {T(x)}), {mean}, dt, "mean");
    Vec var(9, 0), colmean(9, 0);
    for (size_t i = 0; i < v.size(); ++i) colmean[i % 9] += v[i] / 4;
    for (size_t i = 0; i < v.size(); ++i) var[i % 9] += (v[i] - colmean[i % 9]) * (v[i] - colmean[i % 9]) / 3;
    check(f.call("var", {T(x), Value::integer(0)}), var, dt, "var (correction 1)");
  }
}

TEST_CASE("linear, embedding, cross_entropy and attention match float64 references", "[composites]") {
  Fixture f;
  for (DType dt : kFloats) {
    Tensor x = f.make(dt, {3, 4}, 5), w = f.make(dt, {2, 4}, 6), b = f.make(dt, {2}, 7);
    Vec xv = vals(x), wv = vals(w), bv = vals(b), lin(6);
    for (size_t i = 0; i < 3; ++i)
      for (size_t j = 0; j < 2; ++j) {
        lin[i * 2 + j] = bv[j];
        for (size_t k = 0; k < 4; ++k) lin[i * 2 + j] += xv[i * 4 + k] * wv[j * 4 + k];
      }
    check(f.call("linear", {T(x), T(w), T(b)}), lin, dt, "linear");

    Tensor idx = rt::iota(3, 2, -1, DType::i64, nullptr);  // rows 2, 1, 0
    Vec emb;
    for (int r : {2, 1, 0})
      for (size_t k = 0; k < 4; ++k) emb.push_back(xv[r * 4 + k]);
    check(f.call("embedding", {T(idx), T(x)}), emb, dt, "embedding");

    Tensor target = rt::iota(3, 3, -1, DType::i64, nullptr);  // classes 3, 2, 1
    Vec lsm = softmax_ref(xv, 4, true);
    double ce = -(lsm[0 * 4 + 3] + lsm[1 * 4 + 2] + lsm[2 * 4 + 1]) / 3;
    check(f.call("cross_entropy", {T(x), T(target)}), {ce}, dt, "cross_entropy");
    Tensor ignore = rt::iota(3, 3, -1, DType::i64, nullptr);
    ignore.set(1, -100);  // ignore_index rows do not count
    check(f.call("cross_entropy", {T(x), T(ignore)}), {-(lsm[3] + lsm[9]) / 2}, dt, "cross_entropy(ignore_index)");

    // Attention over [heads=2, L=3, E=4] with and without causal masking.
    Tensor q = f.make(dt, {2, 3, 4}, 8), k = f.make(dt, {2, 3, 4}, 9), vt = f.make(dt, {2, 3, 4}, 10);
    Vec qv = vals(q), kv = vals(k), vv = vals(vt);
    for (bool causal : {false, true}) {
      Vec out(24, 0);
      for (size_t h = 0; h < 2; ++h)
        for (size_t i = 0; i < 3; ++i) {
          Vec s(3, -INFINITY);
          for (size_t j = 0; j < 3; ++j) {
            if (causal && j > i) continue;
            s[j] = 0;
            for (size_t e = 0; e < 4; ++e) s[j] += qv[h * 12 + i * 4 + e] * kv[h * 12 + j * 4 + e] / 2.0;
          }
          Vec p = softmax_ref(s, 3, false);
          for (size_t j = 0; j < 3; ++j)
            for (size_t e = 0; e < 4; ++e) out[h * 12 + i * 4 + e] += p[j] * vv[h * 12 + j * 4 + e];
        }
      check(f.call("scaled_dot_product_attention", {T(q), T(k), T(vt)}, {{"is_causal", Value::boolean(causal)}}), out,
            dt, causal ? "sdpa(causal)" : "sdpa");
    }
  }
}

TEST_CASE("dropout keeps 1 - p of the elements, scaled by 1 / (1 - p)", "[composites]") {
  Fixture f;
  Tensor x = rt::full({100000}, rt::Scalar{1.0, 0, false}, DType::f32, nullptr);
  Vec y = vals(f.call("dropout", {T(x), Value::number(0.25)}));
  size_t kept = 0;
  for (double a : y) {
    if (a != 0) {
      ++kept;
      CHECK(a == Approx(1 / 0.75));
    }
  }
  CHECK(std::fabs(kept / 100000.0 - 0.75) < 0.01);
  Vec same = vals(f.call("dropout", {T(x), Value::number(0.0)}));
  CHECK(same == vals(x));
  Vec off = vals(f.call("dropout", {T(x), Value::number(0.5)}, {{"training", Value::boolean(false)}}));
  CHECK(off == vals(x));
}

}  // namespace tracer::test

namespace tracer::test {

TEST_CASE("fused attention equals the decomposed form: causal top-left with L != S, and its gradients",
          "[composites][attention]") {
  // scaled_dot_product_attention with is_causal is prims.attention; the same causal mask written
  // out as the plain formula (tril of [L, S], L != S) must give the same outputs and the same
  // gradients (grad's attention_backward against the decomposition's own rules).
  const char* src = R"(
def fused(q: f64[2, 5, 4], k: f64[2, 7, 4], v: f64[2, 7, 3]):
    o = scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.4)
    return sum(o * o * prims.iota(3, start=1, dtype=f64))

def decomposed(q: f64[2, 5, 4], k: f64[2, 7, 4], v: f64[2, 7, 3]):
    rows = prims.reshape(prims.iota(5), (5, 1))
    cols = prims.reshape(prims.iota(7), (1, 7))
    s = prims.where(prims.ge(rows, cols), prims.mul(prims.matmul(q, prims.transpose(k, (0, 2, 1))), 0.4), -math.inf)
    o = prims.matmul(softmax(s, -1), v)
    return sum(o * o * prims.iota(3, start=1, dtype=f64))
)";
  auto run = [&](const char* entry) {
    Session s;
    REQUIRE(s.load_string("a.trace", src));
    REQUIRE(s.set_passes({"grad", "del_last_used"}));
    auto r = s.run(entry);
    INFO(s.rendered_diagnostics());
    REQUIRE(r);
    return r->outputs;
  };
  auto a = run("fused"), b = run("decomposed");
  REQUIRE(a.size() == 4);  // the loss and the gradients of q, k and v
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].name << ": " << a[i].summary << " vs " << b[i].summary);
    CHECK(a[i].shape == b[i].shape);
    CHECK(std::fabs(a[i].sum - b[i].sum) <= 1e-12 * (1 + std::fabs(b[i].sum)));
    REQUIRE(a[i].head.size() == b[i].head.size());
    REQUIRE(!a[i].head.empty());
    for (size_t j = 0; j < a[i].head.size(); ++j) CHECK(std::fabs(a[i].head[j] - b[i].head[j]) <= 1e-12);
  }
}

}  // namespace tracer::test

namespace tracer::test {

// Masks in fused attention (prims.attention's attn_mask) against the plain formula in float64,
// differentiated by grad's generic rules: b8 masks of every broadcast (over heads, over rows),
// additive masks that need their own gradient, causal together with a mask, L != S, and a row
// with every key masked (NaN in both, as softmax over -inf gives). The additive mask's gradient
// is also checked by central differences.
TEST_CASE("masked fused attention equals the plain formula, its gradients too, the mask's included", "[composites][attention]") {
  const char* src = R"(
def plain(q, k, v, mask, causal, scale):
    r = q.ndim
    L = q.shape[r - 2]
    S = k.shape[r - 2]
    s = prims.mul(prims.matmul(q, prims.transpose(k, tuple(range(r - 2)) + (r - 1, r - 2))), scale)
    if causal:
        s = prims.where(prims.ge(prims.reshape(prims.iota(L), (L, 1)), prims.reshape(prims.iota(S), (1, S))), s, -math.inf)
    if mask.dtype == b8:
        s = prims.where(mask, s, -math.inf)
    else:
        s = prims.add(s, mask)
    return prims.matmul(softmax(s, -1), v)

def weights(o):
    return prims.iota(o.shape[-1], start=1, dtype=f64)

def pattern(L, S):  # a b8 [L, S] mask with every row keeping some keys
    i = prims.reshape(prims.iota(L), (L, 1))
    j = prims.reshape(prims.iota(S), (1, S))
    return prims.ne(prims.remainder(prims.add(prims.mul(i, 3), j), 4), 0)

def bool_fused(q: f64[2, 3, 5, 8], k: f64[2, 3, 7, 8], v: f64[2, 3, 7, 6]):
    o = scaled_dot_product_attention(q, k, v, attn_mask=pattern(5, 7), scale=0.3)
    return sum(o * o * weights(o))

def bool_plain(q: f64[2, 3, 5, 8], k: f64[2, 3, 7, 8], v: f64[2, 3, 7, 6]):
    o = plain(q, k, v, pattern(5, 7), False, 0.3)
    return sum(o * o * weights(o))

def add_fused(q: f64[2, 3, 5, 8], k: f64[2, 3, 7, 8], v: f64[2, 3, 7, 6], m: f64[2, 1, 5, 7]):
    o = scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=True, scale=0.3)
    return sum(o * o * weights(o))

def add_plain(q: f64[2, 3, 5, 8], k: f64[2, 3, 7, 8], v: f64[2, 3, 7, 6], m: f64[2, 1, 5, 7]):
    o = plain(q, k, v, m, True, 0.3)
    return sum(o * o * weights(o))

def row_fused(q: f64[4, 6, 8], k: f64[4, 9, 8], v: f64[4, 9, 5], m: f64[9]):
    o = scaled_dot_product_attention(q, k, v, attn_mask=m, scale=0.5)
    return sum(o * o * weights(o))

def row_plain(q: f64[4, 6, 8], k: f64[4, 9, 8], v: f64[4, 9, 5], m: f64[9]):
    o = plain(q, k, v, m, False, 0.5)
    return sum(o * o * weights(o))

def row_fd(q: f64[4, 6, 8], k: f64[4, 9, 8], v: f64[4, 9, 5], m: f64[9]):
    e = prims.mul(prims.convert_element_type(prims.eq(prims.iota(9), 0), f64), 1e-5)
    hi = scaled_dot_product_attention(q, k, v, attn_mask=prims.add(m, e), scale=0.5)
    lo = scaled_dot_product_attention(q, k, v, attn_mask=prims.sub(m, e), scale=0.5)
    return (sum(hi * hi * weights(hi)) - sum(lo * lo * weights(lo))) / 2e-5

def empty_row(q: f64[1, 4, 8], k: f64[1, 6, 8], v: f64[1, 6, 3]):
    keep = prims.ne(prims.reshape(prims.iota(4), (4, 1)), prims.full((4, 6), 1, dtype=i64))
    o = scaled_dot_product_attention(q, k, v, attn_mask=keep)
    p = plain(q, k, v, keep, False, 1.0 / math.sqrt(8))
    return o, p
)";
  auto run = [&](const char* entry, std::vector<std::string> passes) {
    Session s;
    REQUIRE(s.load_string("m.trace", src));
    REQUIRE(s.set_passes(passes));
    auto r = s.run(entry);
    INFO(entry << ": " << s.rendered_diagnostics());
    REQUIRE(r);
    return r->outputs;
  };
  auto print_of = [&](const char* entry) {
    Session s;
    REQUIRE(s.load_string("m.trace", src));
    auto out = s.print(entry);
    INFO(s.rendered_diagnostics());
    REQUIRE(out);
    return *out;
  };
  for (const char* e : {"bool_fused", "add_fused", "row_fused"}) CHECK_THAT(print_of(e), Catch::Contains("prims.attention("));
  for (const auto& [f, p] : std::vector<std::pair<const char*, const char*>>{{"bool_fused", "bool_plain"}, {"add_fused", "add_plain"}, {"row_fused", "row_plain"}}) {
    auto a = run(f, {"grad", "del_last_used"}), b = run(p, {"grad", "del_last_used"});
    INFO(f);
    REQUIRE(a.size() == b.size());
    REQUIRE(a.size() == (std::string(f) == "bool_fused" ? 4u : 5u));  // the loss, then q, k, v (and the mask's) gradients
    for (size_t i = 0; i < a.size(); ++i) {
      INFO(a[i].name << ": " << a[i].summary << " vs " << b[i].summary);
      CHECK(a[i].shape == b[i].shape);
      CHECK(std::isfinite(a[i].sum));
      CHECK(std::fabs(a[i].sum - b[i].sum) <= 1e-11 * (1 + std::fabs(b[i].sum)));
      REQUIRE(a[i].head.size() == b[i].head.size());
      for (size_t j = 0; j < a[i].head.size(); ++j) CHECK(std::fabs(a[i].head[j] - b[i].head[j]) <= 1e-11 * (1 + std::fabs(b[i].head[j])));
    }
    if (std::string(f) == "row_fused") {
      auto fd = run("row_fd", {});
      REQUIRE(fd.size() == 1);
      REQUIRE(!a[4].head.empty());
      INFO("mask gradient " << a[4].head[0] << " vs central difference " << fd[0].sum);
      CHECK(std::fabs(a[4].head[0] - fd[0].sum) <= 1e-6 * (1 + std::fabs(fd[0].sum)));
      CHECK(std::fabs(a[4].head[0]) > 1e-6);  // the element checked is not trivially zero
    }
  }
  auto e = run("empty_row", {});
  REQUIRE(e.size() == 2);
  REQUIRE(e[0].head.size() == 6);
  for (size_t j = 0; j < 6; ++j) {
    const bool masked_row = j >= 3;  // query row 1 keeps no key
    CHECK(std::isnan(e[0].head[j]) == masked_row);
    CHECK(std::isnan(e[1].head[j]) == masked_row);
    if (!masked_row) CHECK(std::fabs(e[0].head[j] - e[1].head[j]) <= 1e-12);
  }
}

}  // namespace tracer::test
