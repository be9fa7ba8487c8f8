// Special functions for the CPU kernels: digamma and the Hurwitz zeta function (one source with
// the GPU's, runtime/special_math.inc) and the inverse error functions. Double precision; the
// kernels round the results to the output's dtype.
#pragma once
#include <cmath>
#include <limits>

namespace tracer::rt::special {

using std::copysign;
using std::fabs;
using std::floor;
using std::log;
using std::pow;
using std::tan;

#define TR_SF inline
#define TR_SF_INF (std::numeric_limits<double>::infinity())
#define TR_SF_NAN (std::numeric_limits<double>::quiet_NaN())
#include "runtime/special_math.inc"
#undef TR_SF
#undef TR_SF_INF
#undef TR_SF_NAN

inline double digamma(double x) { return tr_sf_digamma(x); }
inline double zeta(double x, double q) { return tr_sf_zeta(x, q); }

// erfcinv for c in (0, 1]: an initial guess from Winitzki's closed form of erf's inverse (about
// 2e-3 relative error; ln(1 - y^2) taken as ln(c (2 - c)) so that tiny c keep their digits), then
// Halley's method on erfc(z) = c, which converges cubically (erfc'' = -2z erfc').
inline double erfcinv_upper(double c) {
  constexpr double pi = 3.14159265358979323846, a = 0.147;
  const double L = std::log(c * (2.0 - c));
  const double t = 2.0 / (pi * a) + 0.5 * L;
  double z = std::sqrt(std::sqrt(t * t - L / a) - t);
  for (int i = 0; i < 4; ++i) {
    const double d = -2.0 / std::sqrt(pi) * std::exp(-z * z);
    if (d == 0) break;
    const double step = (std::erfc(z) - c) / d;
    z -= step / (1.0 + z * step);
  }
  return z;
}

// erf's inverse on [-1, 1]: +-inf at +-1, NaN outside. For |y| <= 1/2 Halley's method on
// erf(z) = y; beyond, erfcinv of 1 - |y| (exact there), where erf(z) - y would cancel.
inline double erfinv(double y) {
  constexpr double pi = 3.14159265358979323846, a = 0.147;
  if (std::isnan(y) || y < -1.0 || y > 1.0) return std::numeric_limits<double>::quiet_NaN();
  if (y == 0.0) return y;
  if (std::fabs(y) == 1.0) return std::copysign(std::numeric_limits<double>::infinity(), y);
  if (std::fabs(y) > 0.5) return std::copysign(erfcinv_upper(1.0 - std::fabs(y)), y);
  const double L = std::log1p(-y * y);
  const double t = 2.0 / (pi * a) + 0.5 * L;
  double z = std::copysign(std::sqrt(std::sqrt(t * t - L / a) - t), y);
  for (int i = 0; i < 4; ++i) {
    const double step = (std::erf(z) - y) / (2.0 / std::sqrt(pi) * std::exp(-z * z));
    z -= step / (1.0 + z * step);
  }
  return z;
}

// erfc's inverse on [0, 2]: +inf at 0, -inf at 2, NaN outside.
inline double erfcinv(double c) {
  if (std::isnan(c) || c < 0.0 || c > 2.0) return std::numeric_limits<double>::quiet_NaN();
  if (c == 0.0) return std::numeric_limits<double>::infinity();
  if (c == 2.0) return -std::numeric_limits<double>::infinity();
  if (c < 0.5) return erfcinv_upper(c);
  if (c > 1.5) return -erfcinv_upper(2.0 - c);
  return erfinv(1.0 - c);
}

// The standard normal distribution's quantile function: -sqrt(2) erfcinv(2p).
inline double ndtri(double p) {
  const double z = -std::sqrt(2.0) * erfcinv(2.0 * p);
  return z == 0.0 ? 0.0 : z;  // +0 at p = 1/2, as PyTorch
}

}  // namespace tracer::rt::special
