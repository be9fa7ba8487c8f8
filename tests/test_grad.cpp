// The grad pass: every gradient rule (and the composites built on them) against float64 central
// finite differences, plus the shape of the forward/backward traces it produces.
#include <catch2/catch.hpp>

#include <cmath>

#include "interpreter/passes.h"
#include "ir/verify.h"
#include "runtime/kernels.h"
#include "tests/support.h"
#include "tracer/session.h"

namespace tracer::test {
namespace {

// Every case ends in loss(y) = sum(y * w(y)) so that each output element gets its own weight.
const char* kPrelude = R"(
def w(x):
    return prims.uniform_philox(x.shape, -1.0, 1.0, dtype=f64, seed=7, offset=1)

def loss(y):
    return sum(y * w(y))
)";

struct Case {
  const char* name;
  const char* body;  // a function named f returning a scalar
  double lo = -1.5, hi = 1.5;
  double eps = 1e-6, tol = 1e-6;
};

const Case kCases[] = {
    {"neg", "def f(a: f64[3, 4]):\n    return loss(prims.neg(a))"},
    {"abs", "def f(a: f64[3, 4]):\n    return loss(prims.abs(a))"},
    {"exp", "def f(a: f64[3, 4]):\n    return loss(prims.exp(a))"},
    {"exp2", "def f(a: f64[3, 4]):\n    return loss(prims.exp2(a))"},
    {"expm1", "def f(a: f64[3, 4]):\n    return loss(prims.expm1(a))"},
    {"log", "def f(a: f64[3, 4]):\n    return loss(prims.log(a))", 0.5, 2.0},
    {"log1p", "def f(a: f64[3, 4]):\n    return loss(prims.log1p(a))", 0.5, 2.0},
    {"log2", "def f(a: f64[3, 4]):\n    return loss(prims.log2(a))", 0.5, 2.0},
    {"sqrt", "def f(a: f64[3, 4]):\n    return loss(prims.sqrt(a))", 0.5, 2.0},
    {"rsqrt", "def f(a: f64[3, 4]):\n    return loss(prims.rsqrt(a))", 0.5, 2.0},
    {"sin", "def f(a: f64[3, 4]):\n    return loss(prims.sin(a))"},
    {"cos", "def f(a: f64[3, 4]):\n    return loss(prims.cos(a))"},
    {"tanh", "def f(a: f64[3, 4]):\n    return loss(prims.tanh(a))"},
    {"erf", "def f(a: f64[3, 4]):\n    return loss(prims.erf(a))"},
    {"reciprocal", "def f(a: f64[3, 4]):\n    return loss(prims.reciprocal(a))", 0.5, 2.0},
    {"asin", "def f(a: f64[3, 4]):\n    return loss(prims.asin(a))", -0.8, 0.8},
    {"acos", "def f(a: f64[3, 4]):\n    return loss(prims.acos(a))", -0.8, 0.8},
    {"atan", "def f(a: f64[3, 4]):\n    return loss(prims.atan(a))"},
    {"asinh", "def f(a: f64[3, 4]):\n    return loss(prims.asinh(a))"},
    {"acosh", "def f(a: f64[3, 4]):\n    return loss(prims.acosh(a))", 1.2, 3.0},
    {"atanh", "def f(a: f64[3, 4]):\n    return loss(prims.atanh(a))", -0.8, 0.8},
    {"sinh", "def f(a: f64[3, 4]):\n    return loss(prims.sinh(a))"},
    {"cosh", "def f(a: f64[3, 4]):\n    return loss(prims.cosh(a))"},
    {"tan", "def f(a: f64[3, 4]):\n    return loss(prims.tan(a))", -1.2, 1.2},
    {"log10", "def f(a: f64[3, 4]):\n    return loss(prims.log10(a))", 0.5, 2.0},
    {"erfc", "def f(a: f64[3, 4]):\n    return loss(prims.erfc(a))"},
    {"trunc", "def f(a: f64[3, 4]):\n    return loss(prims.trunc(a) + a)"},
    {"lgamma", "def f(a: f64[3, 4]):\n    return loss(prims.lgamma(a))", 0.3, 3.0},
    {"digamma", "def f(a: f64[3, 4]):\n    return loss(prims.digamma(a) + prims.digamma(prims.sub(-0.5, a)))", 0.1, 0.4},
    {"erfinv", "def f(a: f64[3, 4]):\n    return loss(prims.erfinv(a))", -0.8, 0.8},
    {"erfcinv", "def f(a: f64[3, 4]):\n    return loss(prims.erfcinv(a))", 0.2, 1.8},
    {"ndtri", "def f(a: f64[3, 4]):\n    return loss(prims.ndtri(a))", 0.1, 0.9},
    // (x, the exponent, gets none: PyTorch has none either.)
    {"zeta", "def f(q: f64[3, 4], r: f64[4]):\n    return loss(prims.zeta(3.0, q) + prims.zeta(2, r) + prims.zeta(4.0, prims.sub(-0.5, q)))", 0.1, 0.4},
    {"add", "def f(a: f64[3, 4], b: f64[4]):\n    return loss(prims.add(a, b))"},
    {"sub", "def f(a: f64[3, 4], b: f64[4]):\n    return loss(prims.sub(a, b))"},
    {"mul", "def f(a: f64[3, 4], b: f64[4]):\n    return loss(prims.mul(a, b) + prims.mul(a, 2.0))"},
    {"div", "def f(a: f64[3, 4], b: f64[4]):\n    return loss(prims.div(a, b))", 0.5, 2.0},
    {"pow", "def f(a: f64[3, 4], b: f64[4]):\n    return loss(prims.pow(a, b) + prims.pow(a, 3))", 0.5, 2.0},
    // A Python number raised to a tensor, and a power of constants (which gets no gradient).
    {"pow_number_base", "def f(a: f64[3, 4]):\n    return loss(2.5 ** a) + loss(a * (2.0 ** prims.iota(4, dtype=f64)))"},
    {"maximum", "def f(a: f64[3, 4], b: f64[4]):\n    return loss(prims.maximum(a, b))"},
    {"minimum", "def f(a: f64[3, 4], b: f64[4]):\n    return loss(prims.minimum(a, b))"},
    {"remainder", "def f(a: f64[3, 4], b: f64[4]):\n    return loss(prims.remainder(a, b))", 0.6, 2.0},
    {"atan2", "def f(a: f64[3, 4], b: f64[4]):\n    return loss(prims.atan2(a, b))"},
    {"fmod", "def f(a: f64[3, 4], b: f64[4]):\n    return loss(prims.fmod(a * 3.0, b))", 0.6, 2.0},
    // (b gets no gradient: a's sign is taken from it.)
    {"copysign", "def f(a: f64[3, 4]):\n    return loss(prims.copysign(a, prims.neg(a)) + prims.copysign(a, 1.0))", 0.3, 2.0},
    {"where", "def f(a: f64[3, 4], b: f64[4]):\n    return loss(prims.where(prims.gt(a, 0.2), a, b))"},
    {"convert", "def f(a: f64[3, 4]):\n    return loss(prims.convert_element_type(prims.convert_element_type(a, f32), f64))",
     -1.5, 1.5, 1e-3, 1e-5},
    {"broadcast_in_dim", "def f(b: f64[4, 1]):\n    return loss(prims.broadcast_in_dim(b, (2, 4, 3), (1, 2)))"},
    {"reshape", "def f(a: f64[3, 4]):\n    return loss(prims.reshape(a, (2, 6)))"},
    {"transpose", "def f(a: f64[2, 3, 4]):\n    return loss(prims.transpose(a, (2, 0, 1)))"},
    {"slice", "def f(a: f64[4, 5]):\n    return loss(a[1:3, 2:])"},
    {"cat", "def f(a: f64[3, 2], b: f64[3, 4]):\n    return loss(prims.cat([a, b, a], 1))"},
    {"sum", "def f(a: f64[2, 3, 4]):\n    return loss(prims.sum(a, (0, 2))) + loss(prims.sum(a, (1,), keepdim=True))"},
    {"prod", "def f(a: f64[3, 4]):\n    return loss(prims.prod(a, (1,)))", 0.5, 1.5},
    {"amax", "def f(a: f64[3, 4]):\n    return loss(prims.amax(a, (1,)))"},
    {"amin", "def f(a: f64[3, 4]):\n    return loss(prims.amin(a, (0,), keepdim=True))"},
    {"matmul", "def f(a: f64[2, 3, 4], b: f64[4, 5]):\n    return loss(prims.matmul(a, b))"},
    {"matmul_vec", "def f(a: f64[4], b: f64[4, 3], c: f64[3]):\n    return loss(prims.matmul(a, b)) + loss(prims.matmul(b, c))"},
    {"linear", "def f(a: f64[2, 3, 4], w: f64[5, 4], b: f64[5]):\n    return loss(prims.linear(a, w, b))"},
    {"take", "def f(a: f64[5, 3]):\n    return loss(prims.take(a, prims.iota(4, start=1, dtype=i64)))"},
    {"sort", "def f(a: f64[3, 4, 2]):\n    v, i = prims.sort(a, 1, True, False)\n    return loss(v) + loss(prims.sort(a)[0])"},
    {"take_dim", "def f(a: f64[2, 5, 3]):\n    i = prims.remainder(prims.iota(6, start=4, dtype=i64), 5)\n"
                 "    return loss(prims.take(a, i, 1)) + loss(prims.take(a, prims.reshape(prims.remainder(i, 3), (2, 3)), -1))"},
    // Thunder's convolution, unfold and interior padding (stdlib/thunder.trace): windows, transposes and matmuls.
    {"convolution_2d", "def f(a: f64[2, 4, 5, 6], w: f64[6, 2, 3, 2], b: f64[6]):\n"
                       "    return loss(prims.convolution(a, w, b, (2, 1), (1, 0), (1, 2), False, (0, 0), 2))"},
    {"convolution_1d_transposed", "def f(a: f64[2, 3, 4], w: f64[3, 2, 3]):\n"
                                  "    return loss(prims.convolution(a, w, None, (2,), (1,), (2,), True, (1,), 1))"},
    {"convolution_3d", "def f(a: f64[1, 2, 3, 4, 3], w: f64[2, 2, 2, 1, 2]):\n"
                       "    return loss(prims.convolution(a, w, None, 1, 1, 1, False, 0, 1))"},
    {"unfold", "def f(a: f64[3, 7]):\n    return loss(prims.unfold(a, 1, 3, 2))"},
    {"pad_interior", "def f(a: f64[3, 4]):\n    return loss(prims.pad(a, 0.5, ((1, -1, 2), (-1, 2, 1))))"},
    // torch's pools and batch statistics (stdlib/ltorch.trace): window gathers, masked products.
    {"max_pool2d", "def f(a: f64[2, 3, 7, 6]):\n    return loss(torch.nn.functional.max_pool2d(a, 3, stride=2, padding=1, ceil_mode=True))"},
    {"avg_pool2d", "def f(a: f64[2, 3, 7, 6]):\n"
                   "    return loss(torch.nn.functional.avg_pool2d(a, (3, 2), stride=2, padding=1, ceil_mode=True, count_include_pad=False))"},
    {"adaptive_pools", "def f(a: f64[2, 3, 7, 5]):\n"
                       "    return loss(torch.nn.functional.adaptive_avg_pool2d(a, (3, 2))) + loss(torch.nn.functional.adaptive_max_pool2d(a, (2, 3)))"},
    {"batch_norm", "def f(a: f64[4, 3, 5], w: f64[3], b: f64[3]):\n"
                   "    return loss(torch.nn.functional.batch_norm(a, None, None, w, b, training=True))"},
    {"group_norm", "def f(a: f64[2, 4, 3], w: f64[4], b: f64[4]):\n    return loss(torch.nn.functional.group_norm(a, 2, w, b))"},
    {"interpolate", "def f(a: f64[2, 3, 4, 5]):\n"
                    "    return loss(torch.nn.functional.interpolate(a, size=(7, 3), mode=\"bilinear\")) + loss(torch.nn.functional.interpolate(a, scale_factor=2))"
                    " + loss(torch.nn.functional.interpolate(a, size=(6, 8), mode=\"bicubic\"))"},
    {"fold_unfold", "def f(a: f64[2, 3, 5, 4], c: f64[1, 12, 6]):\n"
                    "    return loss(torch.nn.functional.unfold(a, (2, 3), padding=1, stride=(1, 2))) + loss(torch.nn.functional.fold(c, (4, 5), 2, stride=(2, 1), dilation=(1, 2)))"},
    // im2col's and fold's own rules (each the other, as gathers): unbatched, 1-d, 3-d, strides that skip places.
    {"fold_unfold_unbatched", "def f(a: f64[3, 5, 4], c: f64[12, 8]):\n"
                              "    return loss(torch.nn.functional.unfold(a, 2, dilation=(2, 1), stride=(1, 3))) + loss(torch.nn.functional.fold(c, (3, 7), (2, 2), padding=(0, 1), stride=(1, 2)))"},
    {"convolution_1d_strided", "def f(a: f64[2, 3, 11], w: f64[4, 3, 3]):\n"
                               "    return loss(prims.convolution(a, w, None, (3,), (2,), (2,), False, (0,), 1))"},
    {"convolution_3d_strided", "def f(a: f64[1, 2, 5, 3, 4], w: f64[3, 2, 2, 2, 3]):\n"
                               "    return loss(prims.convolution(a, w, None, (2, 1, 2), (1, 0, 1), 1, False, 0, 1))"},
    // session 29's torch functions: statistics, views, products, elementwise.
    {"torch_api_more", "def f(a: f64[3, 4], b: f64[4, 2], v: f64[4]):\n"
                       "    return loss(torch.std(a, 1)) + loss(torch.std_mean(a, 0)[0]) + loss(torch.nanmean(a, 1)) + loss(torch.diagonal(a, 1))"
                       " + loss(torch.diag_embed(v, -1)) + loss(torch.tensordot(a, b, 1)) + loss(torch.kron(a, b)) + loss(torch.rot90(a, 3))"
                       " + loss(torch.block_diag(a, b)) + loss(torch.tensor_split(a, 3, 1)[2]) + loss(torch.diff(a, 2, 1)) + loss(torch.addmv(a[:, 0], a, v))"
                       " + loss(torch.inner(a, a)) + loss(torch.select(a, 1, -2)) + loss(torch.float_power(a, 2))"},
    {"orderings", "def f(a: f64[3, 5], b: f64[4, 5]):\n"
                  "    return loss(torch.median(a, 1).values) + loss(torch.kthvalue(a, 2, 0)[0]) + loss(torch.quantile(a, 0.3, 1)) + loss(torch.cummax(a, 1)[0])"
                  " + loss(torch.logcumsumexp(a, 0)) + loss(torch.cdist(a, b)) + loss(torch.nn.functional.pdist(b, 3)) + loss(torch.nn.functional.pairwise_distance(a, a[:, :1]))"},
    {"functional_s29", "def f(a: f64[2, 4, 3, 3], x: f64[3, 4], y: f64[3, 4], w: f64[2, 4, 4], e: f64[6, 4]):\n    F = torch.nn.functional\n"
                       "    return loss(F.local_response_norm(a, 3)) + loss(F.lp_pool2d(a * a + 0.1, 3, 2)) + loss(F.softshrink(x, 0.1)) + loss(F.bilinear(x, y, w))"
                       " + F.margin_ranking_loss(x, y, prims.sign(y)) + F.soft_margin_loss(x, prims.sign(y)) + F.triplet_margin_loss(x, y, x * 0.5)"
                       " + F.poisson_nll_loss(x, y * y) + F.gaussian_nll_loss(x, y, x * x + 0.5) + F.multi_margin_loss(x, prims.iota(3, dtype=i64))"
                       " + F.multilabel_margin_loss(x, prims.reshape(prims.remainder(prims.iota(6, dtype=i64), 4), (3, 2)))"
                       " + loss(F.max_unpool2d(*F.max_pool2d(a, 2, return_indices=True), 2, output_size=(3, 3)))"
                       " + loss(F.embedding_bag(prims.iota(5, dtype=i64), e, prims.iota(2, start=0, step=2, dtype=i64)))"
                       " + loss(F.embedding_bag(prims.iota(5, dtype=i64), e, prims.iota(2, start=0, step=2, dtype=i64), mode=\"max\"))"},
    {"grid_sample", "def f(a: f64[2, 3, 4, 5], g: f64[2, 3, 2, 2], t: f64[2, 2, 3]):\n    F = torch.nn.functional\n"
                    "    return loss(F.grid_sample(a, g)) + loss(F.grid_sample(a, g, padding_mode=\"border\", align_corners=True))"
                    " + loss(F.grid_sample(a, g * 1.3, padding_mode=\"reflection\")) + loss(F.affine_grid(t, (2, 3, 4, 5)))", -0.9, 0.9},
    {"torch_s30", "def f(a: f64[3, 4], b: f64[3, 4], v: f64[3]):\n"
                  "    return loss(torch.trapezoid(a)) + loss(torch.cumulative_trapezoid(a, dx=0.5, dim=0)) + loss(torch.cov(a))"
                  " + loss(torch.corrcoef(a * 2.0 + b)) + loss(torch.renorm(a, 2, 0, 1.0)) + loss(torch.cross(a[:, 0:3], b[:, 1:4], dim=1))"
                  " + loss(torch.logaddexp2(a, b)) + loss(torch.dist(a, b)) + loss(torch.select_scatter(a, v, 1, 2))"
                  " + loss(torch.slice_scatter(a, b[:, 0:2], 1, 1, 4, 2)) + loss(torch.diagonal_scatter(a, v, 1))"
                  " + loss(torch.put(a, prims.iota(3, start=2, step=3), v, accumulate=True))"
                  " + loss(torch.masked_scatter(a, prims.reshape(prims.eq(prims.remainder(prims.iota(12), 3), 0), (3, 4)), b))"},
    {"linalg", "def f(a: f64[2, 3, 3], b: f64[2, 3, 2]):\n"
               "    s = a @ a.mT + prims.broadcast_in_dim(torch.eye(3, dtype=f64), (2, 3, 3), (1, 2)) * 3.0\n"
               "    return loss(torch.linalg.det(a)) + loss(torch.linalg.inv(a + 2.0)) + loss(torch.linalg.solve(a, b))"
               " + loss(torch.linalg.slogdet(a).logabsdet) + loss(torch.linalg.cholesky(s))"},
    {"bessel", "def f(a: f64[3, 4]):\n    return loss(torch.i0(a * 5.0)) + loss(torch.special.i1(a * 5.0)) + loss(torch.special.i0e(a * 12.0 + 1.0))"
               " + loss(torch.special.i1e(a * 12.0))"},
    {"ctc_loss", "def f(a: f64[6, 2, 4]):\n    F = torch.nn.functional\n"
                 "    lp = log_softmax(a, 2)\n"
                 "    t = prims.reshape(prims.remainder(prims.iota(6, start=1, dtype=i64), 3) + 1, (2, 3))\n"
                 "    return F.ctc_loss(lp, t, [6, 5], [3, 2]) + loss(F.ctc_loss(lp, t, [6, 6], [2, 3], reduction=\"none\"))"},
    {"grid_sample_5d_bicubic", "def f(a: f64[1, 2, 2, 3, 4], g: f64[1, 2, 2, 1, 3], b: f64[1, 2, 4, 5], h: f64[1, 3, 2, 2]):\n    F = torch.nn.functional\n"
                    "    return loss(F.grid_sample(a, g)) + loss(F.grid_sample(a, g * 1.2, padding_mode=\"reflection\", align_corners=True))"
                    " + loss(F.grid_sample(b, h, mode=\"bicubic\")) + loss(F.grid_sample(b, h * 1.3, mode=\"bicubic\", padding_mode=\"border\"))", -0.9, 0.9},
    // Writes through views (Tensor.X_, prims.update_aliases): the written positions take the
    // written value's gradient, the rest the tensor's.
    {"inplace_views", "def f(a: f64[3, 4], b: f64[4], c: f64[2, 2]):\n"
                      "    y = a * 1.0\n    y[1].mul_(b)\n    (y,) = prims.update_aliases((y,))\n"
                      "    y.t()[1:3, 0:2].copy_(c * c)\n    (y,) = prims.update_aliases((y,))\n"
                      "    z = y.reshape(2, 6)\n    z.exp_()\n    (y, z) = prims.update_aliases((y, z))\n"
                      "    return loss(y) + loss(z[:, ::3])"},
    {"inplace_two_slices", "def f(a: f64[4, 5], b: f64[2, 2]):\n    y = a * 1.0\n    y[1:][::2, 1:4:2].mul_(b)\n"
                           "    (y,) = prims.update_aliases((y,))\n    return loss(y)"},
    // scatter_reduce's segmented scan (sort, then log2(m) shifted combines): every reduction,
    // include_self either way; values distinct so amax/amin have no ties.
    {"scatter_reduce", "def f(a: f64[4, 3], s: f64[5, 3]):\n"
                       "    i = prims.reshape(prims.remainder(prims.iota(15, start=7, step=5, dtype=i64), 4), (5, 3))\n"
                       "    r = loss(torch.scatter_reduce(a, 0, i, s, 'prod')) + loss(torch.scatter_reduce(a, 0, i, s, 'mean', include_self=False))\n"
                       "    return r + loss(torch.scatter_reduce(a, 0, i, s, 'amax')) + loss(a.scatter_reduce(0, i, s, 'amin', include_self=False))"
                       " + loss(a.scatter_reduce(0, i, s, 'sum', include_self=False))"},
    {"inplace_slice_chain", "def f(a: f64[5, 6], b: f64[2, 3]):\n    y = a * 1.0\n    y[1:].t()[::2][1:, 0:3].mul_(b)\n"
                            "    y[2][1:4].add_(b[0] * b[1])\n    return loss(y)"},
    {"strided_slice", "def f(a: f64[5, 7, 3]):\n    return loss(a[::2, 1::3]) + loss(a[1:5:3, 0:7:6, ::2] * a[0:2, 1:7:4, 0:2])"},
    {"logit_xlogy", "def f(a: f64[3, 4], b: f64[3, 4]):\n    return loss(torch.logit(a, 0.1)) + loss(torch.xlogy(a, b))", 0.2, 0.8},
    // torch.nn.functional's activations, normalizations and losses (stdlib/ltorch.trace).
    {"activations_more", "def f(a: f64[3, 4]):\n    F = torch.nn.functional\n"
                         "    return loss(F.leaky_relu(a, 0.2) + F.elu(a) + F.selu(a) + F.softplus(a, 2.0, 1.0) + F.mish(a) + F.hardswish(a)"
                         " + F.logsigmoid(a) + F.softsign(a) + F.tanhshrink(a) + F.celu(a, 0.5)) + loss(F.glu(a, 1))"},
    {"normalize_cosine", "def f(a: f64[3, 4], b: f64[3, 4]):\n    F = torch.nn.functional\n"
                         "    return loss(F.normalize(a, dim=1)) + loss(F.normalize(a, p=3.0, dim=0)) + loss(F.cosine_similarity(a, b))"
                         " + loss(F.instance_norm(prims.reshape(a, (1, 3, 4))))"},
    {"losses", "def f(a: f64[3, 4], b: f64[3, 4]):\n    F = torch.nn.functional\n"
               "    p = prims.mul(prims.add(prims.tanh(a), 1.0), 0.45)\n    q = prims.mul(prims.add(prims.tanh(b), 1.0), 0.5)\n"
               "    return F.mse_loss(a, b) + F.l1_loss(a, b) + F.smooth_l1_loss(a, b, beta=0.5) + F.huber_loss(a, b, delta=0.7)"
               " + F.binary_cross_entropy(p, q) + F.binary_cross_entropy_with_logits(a, q, pos_weight=prims.full((4,), 2.0, dtype=f64))"
               " + F.nll_loss(F.log_softmax(a, 1), prims.iota(3, dtype=i64), weight=prims.full((4,), 0.5, dtype=f64))"
               " + F.kl_div(F.log_softmax(a, 1), F.softmax(b, 1), reduction=\"batchmean\")"},
    {"tensor_more", "def f(a: f64[3, 4], b: f64[4, 5]):\n"
                    "    return loss(torch.cumsum(a, 1)) + loss(torch.cumprod(a, 0)) + loss(torch.einsum(\"ij,jk->ik\", a, b))"
                    " + loss(torch.einsum(\"ij,kj->ik\", a, a)) + loss(torch.tril(a, 1)) + loss(torch.roll(a, 2, 1)) + loss(torch.tile(a, (2, 1)))"
                    " + loss(torch.diag(a, 1)) + loss(torch.max(a, 1)[0]) + loss(torch.movedim(a, 0, 1)) + loss(torch.addmm(b, a.t(), a[:, :1].expand(3, 5)))"
                    " + loss(torch.norm(a, dim=1)) + loss(torch.linalg.vector_norm(b, 3, 0)) + torch.linalg.matrix_norm(a)"},
    {"take_backward", "def f(g: f64[4, 3]):\n    return loss(prims.take_backward(g, prims.iota(4, dtype=i64), 6))"},
    {"softmax", "def f(a: f64[3, 5]):\n    return loss(softmax(a, -1))"},
    {"log_softmax", "def f(a: f64[3, 5]):\n    return loss(log_softmax(a, 1))"},
    {"layer_norm", "def f(a: f64[3, 5], w: f64[5], b: f64[5]):\n    return loss(layer_norm(a, (5,), w, b))"},
    {"rms_norm", "def f(a: f64[3, 5], w: f64[5]):\n    return loss(rms_norm(a, (5,), w)) + loss(rms_norm(a))"},
    {"rms_norm_kw", "def f(a: f64[2, 3, 4], w: f64[3, 4]):\n    return loss(rms_norm(a, (3, 4), weight=w, eps=0.01))"},
    {"gelu", "def f(a: f64[3, 5]):\n    return loss(gelu(a)) + loss(gelu(a, approximate='tanh'))"},
    {"silu_sigmoid", "def f(a: f64[3, 5]):\n    return loss(silu(a)) + loss(sigmoid(a))"},
    {"var_mean", "def f(a: f64[3, 5]):\n    return loss(var(a, 1)) + mean(a * a)"},
    {"cross_entropy", "def f(a: f64[4, 5]):\n    return cross_entropy(a, prims.iota(4, start=1, dtype=i64))"},
    {"cross_entropy_ignore_sum", "def f(a: f64[4, 5]):\n"
                                 "    t = prims.where(prims.eq(prims.iota(4, dtype=i64), 2), -100, prims.iota(4, start=1, dtype=i64))\n"
                                 "    return cross_entropy(a, t, reduction='sum') + loss(cross_entropy(a * 2.0, t, reduction='none'))"},
    {"layer_norm_3d", "def f(a: f64[2, 3, 5], w: f64[3, 5], b: f64[3, 5]):\n"
                      "    return loss(layer_norm(a, (3, 5), w, b, eps=0.01)) + loss(layer_norm(a, (5,)))"},
    {"layer_norm_weight_only", "def f(a: f64[4, 6], w: f64[6]):\n    return loss(layer_norm(a, (6,), weight=w))"},
    {"logsumexp", "def f(a: f64[3, 4, 5]):\n    return loss(logsumexp(a, 1)) + loss(logsumexp(a, (0, 2), keepdim=True))"},
    {"softmax_dims", "def f(a: f64[3, 4, 5]):\n    return loss(softmax(a, 0)) + loss(log_softmax(a, -2)) + loss(softmax(a, 2, dtype=f64))"},
    {"attention", "def f(q: f64[2, 3, 4], k: f64[2, 3, 4], v: f64[2, 3, 4]):\n"
                  "    return loss(scaled_dot_product_attention(q, k, v, is_causal=True))"},
    {"embedding", "def f(e: f64[6, 3]):\n    return loss(embedding(prims.iota(5, dtype=i64), e))"},
    {"dropout", "def f(a: f64[4, 6]):\n    return loss(dropout(a, 0.3))"},
    {"mlp", "def f(x: f64[3, 4], w1: f64[5, 4], w2: f64[2, 5]):\n"
            "    return loss(linear(relu(linear(x, w1)), w2))"},
};

struct Program {
  SourceManager sm;
  interp::Interpreter in{sm};
  std::shared_ptr<ir::Trace> trace;
  interp::Traces fwbw;
};

double run_loss(const ir::Trace& t, const std::vector<rt::Tensor>& inputs) {
  ir::ExecContext ctx;
  ctx.seed = 3;
  std::vector<rt::Tensor> copies;
  for (const auto& x : inputs) copies.push_back(rt::cast(x, x.dtype(), nullptr));
  return ir::execute(t, std::move(copies), ctx).tensor.get(0);
}

std::vector<rt::Tensor> run_grads(const interp::Traces& p, const std::vector<rt::Tensor>& inputs) {
  ir::ExecContext ctx;
  ctx.seed = 3;
  ir::Arg out = ir::execute(*p[0], inputs, ctx);
  const ir::Trace& bw = *p[1];
  std::vector<rt::Tensor> bin;
  for (const ir::Arg& s : out.items[1].items) bin.push_back(s.tensor);
  bin.push_back(rt::full({}, rt::Scalar{1.0, 1, false}, rt::DType::f64, nullptr));
  REQUIRE(bin.size() == bw.inputs.size());
  ir::Arg g = ir::execute(bw, std::move(bin), ctx);
  std::vector<rt::Tensor> grads;
  for (const ir::Arg& x : g.items) grads.push_back(x.kind == ir::Arg::Kind::Tensor ? x.tensor : rt::Tensor());
  return grads;
}

}  // namespace

TEST_CASE("gradient rules match float64 finite differences", "[grad]") {
  for (const Case& c : kCases) {
    DYNAMIC_SECTION(c.name) {
      Program p;
      DiagnosticList d;
      auto m = p.in.load("grad_case.trace", std::string(kPrelude) + c.body + "\n", d);
      INFO(d.render_all(p.sm));
      REQUIRE(m);
      const auto& fn = *m->globals.at("f").as<interp::FunctionObj>();
      p.trace = p.in.trace(fn, {});
      interp::PassOptions opts;
      p.fwbw = interp::run_passes(p.in, {p.trace}, {"grad", "del_last_used"}, opts, nullptr);
      REQUIRE(p.fwbw.size() == 2);
      std::vector<rt::Tensor> inputs;
      for (size_t i = 0; i < p.trace->inputs.size(); ++i)
        inputs.push_back(rt::uniform_philox(p.trace->inputs[i]->type.shape, c.lo, c.hi, rt::DType::f64, 11, i, nullptr));
      std::vector<rt::Tensor> grads = run_grads(p.fwbw, inputs);
      REQUIRE(grads.size() == inputs.size());
      for (size_t i = 0; i < inputs.size(); ++i) {
        REQUIRE(grads[i].defined());
        for (int64_t j = 0; j < inputs[i].numel(); ++j) {
          double x0 = inputs[i].get(j);
          inputs[i].set(j, x0 + c.eps);
          double up = run_loss(*p.trace, inputs);
          inputs[i].set(j, x0 - c.eps);
          double down = run_loss(*p.trace, inputs);
          inputs[i].set(j, x0);
          double fd = (up - down) / (2 * c.eps), an = grads[i].get(j);
          INFO(c.name << ": input " << i << " element " << j << ": analytic " << an << ", finite difference " << fd);
          CHECK(std::fabs(an - fd) <= c.tol * 10 + c.tol * std::fabs(fd) * 10);
        }
      }
    }
  }
}

TEST_CASE("grad builds a forward returning (loss, saved) and a backward returning input gradients", "[grad]") {
  Program p;
  DiagnosticList d;
  auto m = p.in.load("g.trace", "def f(x: f32[4], w: f32[4], t: i64[4]):\n    return sum(x * w + float32(t))\n", d);
  REQUIRE(m);
  p.trace = p.in.trace(*m->globals.at("f").as<interp::FunctionObj>(), {});
  auto out = interp::run_passes(p.in, {p.trace}, {"grad"}, {}, nullptr);
  REQUIRE(out.size() == 2);
  const ir::Trace &fw = *out[0], &bw = *out[1];
  CHECK(fw.output.items.size() == 2);
  CHECK(bw.inputs.back()->name.rfind("ct_", 0) == 0);
  REQUIRE(bw.output.items.size() == 3);
  CHECK(bw.output.items[0].proxy->name == "grad_x");
  CHECK(bw.output.items[1].proxy->name == "grad_w");
  CHECK(bw.output.items[2].kind == ir::Arg::Kind::None);  // integers get no gradient
  CHECK(fw.provenance.back().rfind("Constructed by grad (took ", 0) == 0);
  CHECK(ir::verify(fw).empty());
  CHECK(ir::verify(bw).empty());
}

TEST_CASE("grad refuses what it cannot differentiate", "[grad]") {
  auto fails = [](const std::string& src, const std::string& msg) {
    Program p;
    DiagnosticList d;
    auto m = p.in.load("g.trace", src, d);
    REQUIRE(m);
    p.trace = p.in.trace(*m->globals.at("f").as<interp::FunctionObj>(), {});
    try {
      interp::run_passes(p.in, {p.trace}, {"grad"}, {}, nullptr);
      FAIL("grad should have failed");
    } catch (const interp::PassError& e) {
      CHECK_THAT(e.diag.message, Catch::Contains("pass 'grad'") && Catch::Contains(msg));
      CHECK(e.diag.message.size() < 600);  // a printout's whole output is not repeated back
    }
    CHECK(p.trace->provenance.size() == 1);  // the original trace is untouched
  };
  fails("def f(x: f32[4]):\n    return x * 2.0\n", "scalar floating-point loss");
  fails("def f(x: f32[4]):\n    return [x * float(i) for i in range(400)], x\n", "got a tuple of 2 (");
  fails("def f(x: i64[4]):\n    return sum(float32(x))\n", "no input requires a gradient");
  fails("def f(x: f32[4]):\n    return sum(prims.bitcast(x, f32))\n", "prims.bitcast has no gradient");
}

}  // namespace tracer::test

namespace tracer::test {

namespace {

// Runs FILE's entry with the passes and writes every output as DIR/NAME.npy; returns DIR.
std::string run_to_dir(const std::string& file, const std::vector<std::string>& passes, const std::string& tag) {
  std::string dir = (std::filesystem::temp_directory_path() / ("tracer_grad_" + tag)).string();
  std::filesystem::remove_all(dir);
  Session s;
  for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{
           {"T", "16"}, {"L", "3"}, {"D", "32"}, {"H", "48"}, {"B", "3"}, {"V", "96"}, {"NH", "4"}})
    s.set(k, v);
  REQUIRE(s.set_passes(passes));
  REQUIRE(s.load_file(file));
  auto r = s.run(*s.entry(""), dir);
  INFO(s.rendered_diagnostics());
  REQUIRE(r);
  return dir;
}

}  // namespace

TEST_CASE("checkpoint, philox, remat and fuse leave gradients bit for bit equal, dropout included", "[grad][checkpoint]") {
  std::string f = source_dir() + "/examples/llama_mlp_checkpoint.trace";
  std::string plain = run_to_dir(f, {"grad", "del_last_used"}, "plain");
  std::string ckpt = run_to_dir(f, {"grad", "checkpoint", "del_last_used"}, "ckpt");
  std::string philox = run_to_dir(f, {"grad", "philox", "del_last_used"}, "philox");
  std::string all = run_to_dir(f, {"grad", "checkpoint", "philox", "remat", "fuse", "del_last_used"}, "all");
  std::string reordered = run_to_dir(f, {"grad", "checkpoint", "philox", "remat", "fuse_reorder", "del_last_used"}, "reordered");
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(plain)) {
    std::string name = e.path().filename().string();
    INFO(name);
    std::string a = read_file(e.path().string());
    CHECK(a == read_file(ckpt + "/" + name));
    CHECK(a == read_file(philox + "/" + name));
    CHECK(a == read_file(all + "/" + name));
    CHECK(a == read_file(reordered + "/" + name));
    ++files;
  }
  CHECK(files == 1 + 1 + 3 * 3);  // the loss, then the gradients of x and of 3 blocks' 3 weights
}

// Runs FILE's `entry` with the passes, every output written as DIR/NAME.npy; returns DIR.
std::string run_entry_to_dir(const std::string& file, const std::string& entry, const std::vector<std::string>& passes,
                             const std::string& tag) {
  std::string dir = (std::filesystem::temp_directory_path() / ("tracer_fuse_" + tag)).string();
  std::filesystem::remove_all(dir);
  Session s;
  REQUIRE(s.set_passes(passes));
  REQUIRE(s.load_file(file));
  auto r = s.run(entry, dir);
  INFO(s.rendered_diagnostics());
  REQUIRE(r);
  return dir;
}

// Every op of tests/gpu/ops.trace (views, cats, fills and iotas in groups among them) gives the
// same bits fused as unfused on the CPU.
TEST_CASE("fuse changes no output of tests/gpu/ops.trace on the CPU", "[fuse]") {
  std::string f = source_dir() + "/tests/gpu/ops.trace";
  for (const char* e : {"ops_f32", "ops_bf16", "ops_f16", "ops_i32", "ops_b8", "ops_reduce_f32", "ops_reduce_lowp", "ops_broadcast",
                        "ops_layout", "ops_views", "ops_gather", "ops_column_views", "ops_scatter_reduce", "ops_pads"}) {
    DYNAMIC_SECTION(e) {
      std::string a = run_entry_to_dir(f, e, {}, "plain"), b = run_entry_to_dir(f, e, {"fuse"}, "fused");
      size_t files = 0;
      for (const auto& x : std::filesystem::directory_iterator(a)) {
        std::string name = x.path().filename().string();
        INFO(name);
        CHECK(read_file(x.path().string()) == read_file(b + "/" + name));
        ++files;
      }
      CHECK(files > 0);
    }
  }
}

// Fusing changes no number on the CPU: groups with views, fills, iotas and reductions over rows
// and columns (the GPT's cross entropy, layer norms and bias gradients) run block by block and
// reduce in the unfused order.
TEST_CASE("fuse leaves the GPT's loss and gradients bit for bit equal on the CPU", "[grad][fuse]") {
  std::string f = source_dir() + "/examples/gpt.trace";
  for (const auto& [unfused, fused] : std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>>{
           {{"grad", "del_last_used"}, {"grad", "fuse", "del_last_used"}},
           {{"grad", "remat", "del_last_used"}, {"grad", "remat", "fuse", "del_last_used"}},
           {{"grad", "remat", "del_last_used"}, {"grad", "remat", "fuse_reorder", "del_last_used"}}}) {
    std::string a = run_to_dir(f, unfused, "gpt_unfused"), b = run_to_dir(f, fused, "gpt_fused");
    size_t files = 0;
    for (const auto& e : std::filesystem::directory_iterator(a)) {
      std::string name = e.path().filename().string();
      INFO(name << " after " << fused.size() << " passes");
      CHECK(read_file(e.path().string()) == read_file(b + "/" + name));
      ++files;
    }
    CHECK(files == 1 + 2 + 3 * 12 + 2);  // the loss; wte, wpe; 12 parameters a block; the final norm
  }
}

// tracer mem --device cuda counts each allocation as the CUDA allocator does (512-byte granules
// up to 1 MiB, then 2 MiB), which is how the device's peak is measured.
TEST_CASE("the estimate in the CUDA allocator's granules", "[memory]") {
  Session s;
  REQUIRE(s.load_string("g.trace", "def f(x: u8[1000], y: f32[300000]):\n    return x + 1, y * 2.0\n"));
  auto exact = s.memory("f", "cpu"), cuda = s.memory("f", "cuda");
  REQUIRE(exact);
  REQUIRE(cuda);
  // inputs 1000 + 1.2 MB, outputs the same: exact 2 * (1000 + 1200000); granules 2 * (1024 + 2 MiB)
  CHECK(exact->peak_bytes == 2 * (1000 + 1200000));
  CHECK(cuda->peak_bytes == 2 * (1024 + 2 * 1024 * 1024));
  CHECK_FALSE(s.memory("f", "tpu"));
}

TEST_CASE("checkpoint saves only region inputs and lowers the estimated peak", "[checkpoint][memory]") {
  auto mem = [](const std::vector<std::string>& passes) {
    Session s;
    for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{{"T", "64"}, {"L", "4"}, {"D", "32"}, {"H", "96"}})
      s.set(k, v);
    REQUIRE(s.set_passes(passes));
    REQUIRE(s.load_file(source_dir() + "/examples/llama_mlp_checkpoint.trace"));
    auto m = s.memory(*s.entry(""));
    INFO(s.rendered_diagnostics());
    REQUIRE(m);
    return *m;
  };
  MemoryReport plain = mem({"grad", "del_last_used"}), ckpt = mem({"grad", "checkpoint", "del_last_used"});
  CHECK(ckpt.saved_for_backward_bytes < plain.saved_for_backward_bytes / 4);
  CHECK(ckpt.peak_bytes < plain.peak_bytes);
  // Saved: each block's input x (bf16 [64, 32]), the f32 copy of the last output for the loss,
  // and the Philox seed and offsets (8 bytes each); the parameters are inputs, not counted.
  CHECK(ckpt.saved_for_backward_bytes == 3 * 64 * 32 * 2 + 64 * 32 * 4 + (1 + 4) * 8);
}

TEST_CASE("the standard pipeline never raises the estimated peak over the untransformed order", "[passes][memory]") {
  for (const char* f : {"/examples/llama_mlp.trace", "/examples/llama_mlp_checkpoint.trace", "/examples/mlp.trace", "/examples/gpt.trace"}) {
    auto peak = [&](const std::vector<std::string>& passes) {
      Session s;
      for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{
               {"T", "64"}, {"L", "3"}, {"D", "32"}, {"H", "96"}, {"B", "2"}, {"V", "128"}, {"NH", "4"}})
        s.set(k, v);
      REQUIRE(s.set_passes(passes));
      REQUIRE(s.load_file(source_dir() + f));
      auto m = s.memory(*s.entry(""));
      REQUIRE(m);
      return m->peak_bytes;
    };
    INFO(f);
    size_t base = peak({"grad", "del_last_used"});
    CHECK(peak({"grad", "philox", "del_last_used"}) <= base);
    CHECK(peak({"grad", "checkpoint", "philox", "del_last_used"}) <= base);
    CHECK(peak({"grad", "cse", "dce", "del_last_used"}) <= base);
    CHECK(peak({"grad", "checkpoint", "philox", "remat", "fuse", "del_last_used"}) <= base);
  }
}

}  // namespace tracer::test

namespace tracer::test {

TEST_CASE("fuse never raises the peak: norms on one-row batches, fused or not on the CPU", "[fuse][memory]") {
  // [1, T, C] has one row in dim 0: its fusions run block by block over T (the first dimension
  // that is not 1), and the estimate must still be the CPU's measured peak.
  const char* src = R"(
def f(x: f32[1, 64, 32], y: f32[64, 32], w: f32[32], b: f32[32]):
    u = ltorch.layer_norm(x, (32,), w, b)
    v = ltorch.layer_norm(y, (32,), w, b)
    s = ltorch.softmax(x, -1)
    return sum(u * u) + sum(v * v) + sum(s * s)
)";
  auto run = [&](const std::vector<std::string>& passes) {
    Session s;
    REQUIRE(s.load_string("f.trace", src));
    REQUIRE(s.set_passes(passes));
    auto m = s.memory("f");
    auto r = s.run("f");
    INFO(s.rendered_diagnostics());
    REQUIRE(m);
    REQUIRE(r);
    CHECK(r->peak_bytes == m->peak_bytes);  // the estimate is the CPU's measured peak
    return std::make_pair(m->peak_bytes, r->outputs);
  };
  for (const std::vector<std::string>& pre : {std::vector<std::string>{}, std::vector<std::string>{"grad"}}) {
    std::vector<std::string> plain = pre, fused = pre;
    plain.push_back("del_last_used");
    fused.push_back("fuse");
    fused.push_back("del_last_used");
    auto [p0, o0] = run(plain);
    auto [p1, o1] = run(fused);
    INFO(pre.size());
    CHECK(p1 <= p0);
    REQUIRE(o0.size() == o1.size());
    for (size_t i = 0; i < o0.size(); ++i) CHECK(o0[i].summary == o1[i].summary);
  }
}

}  // namespace tracer::test

namespace tracer::test {

// A batch of one ([1, T, C], as Thunder's printouts of single sequences have) splits its blocks
// at T: before, nothing with a leading 1 fused (a 16-layer Llama printout got no fusion at all).
// Leading ones of every count, rms norms (row reductions), softmax, gated MLP activations, views
// of weights broadcast to [1, T, C], dropout under philox and the weights' gradients (reductions
// over the leading dimensions) give the same bits fused, and the estimate is the measured peak.
TEST_CASE("batch-one shapes fuse and run block by block: the same bits, the estimate is the peak", "[fuse][memory]") {
  const char* src = R"(
def f(x: f32[1, 48, 32], q: f32[1, 1, 40, 24], w: f32[32], v: f32[24], u: f32[32, 64]):
    h = ltorch.rms_norm(x, (32,), w)
    g = ltorch.linear(h, ltorch.transpose(u, 0, 1))
    a = ltorch.silu(g) * g
    d = ltorch.dropout(a, 0.25)
    p = ltorch.softmax(q * v, -1)
    r = ltorch.layer_norm(q, (24,), v, v)
    return sum(d * d) + sum(p * r) + sum(h)
)";
  auto run = [&](const std::vector<std::string>& passes, const std::string& dir, int* fusions) {
    std::filesystem::remove_all(dir);
    Session s;
    REQUIRE(s.load_string("f.trace", src));
    REQUIRE(s.set_passes(passes));
    auto text = s.print("f");
    auto m = s.memory("f");
    auto r = s.run("f", dir);
    INFO(s.rendered_diagnostics());
    REQUIRE(text);
    REQUIRE(m);
    REQUIRE(r);
    CHECK(r->peak_bytes == m->peak_bytes);
    *fusions = 0;
    for (size_t at = text->find("= fusion"); at != std::string::npos; at = text->find("= fusion", at + 1)) ++*fusions;
    return m->peak_bytes;
  };
  const auto tmp = std::filesystem::temp_directory_path();
  const std::string a = (tmp / "tracer_batch_one_plain").string(), b = (tmp / "tracer_batch_one_fused").string();
  int plain_fusions = 0, fused_fusions = 0;
  size_t p0 = run({"grad", "philox", "del_last_used"}, a, &plain_fusions);
  size_t p1 = run({"grad", "philox", "fuse", "del_last_used"}, b, &fused_fusions);
  CHECK(plain_fusions == 0);
  CHECK(fused_fusions >= 12);  // 15 today; 2 before blocks split past leading ones
  CHECK(p1 <= p0);
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(a)) {
    std::string name = e.path().filename().string();
    INFO(name);
    CHECK(read_file(e.path().string()) == read_file(b + "/" + name));
    ++files;
  }
  CHECK(files == 6);  // the loss and five gradients
}

TEST_CASE("fuse makes only fusions that run whole: one GPU kernel or a row group", "[fuse][memory]") {
  // r ([64, 1]) and z ([64, 1024]) could fuse block by block on the CPU, where the fusion would
  // hold only r and z; but a GPU elementwise kernel has one output shape, so on the GPU its parts
  // would run one by one with every value (exp(x), y) at full size. Counting those, the run does
  // not fit under the peak (set by big * big), so r and z must not share a fusion.
  const char* src = R"(
def f(s: f32[64, 1], x: f32[64, 1024], big: f32[65536]):
    t = sum(big * big)
    r = rsqrt(s + 1.0)
    y = exp(x) * r
    z = y * 2.0
    return sum(z) + sum(r) + t
)";
  Session s;
  REQUIRE(s.load_string("f.trace", src));
  REQUIRE(s.set_passes({"fuse", "del_last_used"}));
  auto text = s.print("f");
  INFO(s.rendered_diagnostics());
  REQUIRE(text);
  INFO(*text);
  std::istringstream lines(*text);
  std::string line;
  int fusions = 0;
  while (std::getline(lines, line)) {
    if (line.find("= fusion") == std::string::npos || line.find("#") < line.find("= fusion")) continue;
    ++fusions;
    // A fusion's outputs are listed as [a, b]: r and z never share one.
    bool has_r = line.find("[r") != std::string::npos || line.find(", r]") != std::string::npos || line.find(", r,") != std::string::npos;
    bool has_z = line.find("z]") != std::string::npos || line.find("[z") != std::string::npos || line.find(" z,") != std::string::npos;
    CHECK_FALSE((has_r && has_z));
  }
  CHECK(fusions > 0);
}

TEST_CASE("grad refuses zeta's exponent, nextafter and bitcast, which have no gradient (as in PyTorch), by name", "[grad]") {
  for (const auto& [body, what] : std::vector<std::pair<std::string, std::string>>{
           {"def f(x: f32[3], q: f32[3]):\n    return sum(prims.zeta(x, q))\n", "prims.zeta has no gradient for its first argument x"},
           {"def f(x: f32[3]):\n    return sum(prims.nextafter(x, 0.0))\n", "no gradient rule for prims.nextafter"},
           {"def f(x: f32[4]):\n    return sum(prims.bitcast(prims.bitcast(x, i32), f32) * x)\n", "prims.bitcast has no gradient"}}) {
    Session s;
    REQUIRE(s.load_string("g.trace", body));
    REQUIRE(s.set_passes({"grad"}));
    CHECK_FALSE(s.print("f"));
    CHECK_THAT(s.rendered_diagnostics(), Catch::Contains(what));
  }
}

}  // namespace tracer::test
