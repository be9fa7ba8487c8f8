// Counter-based random numbers: Philox4x32-10 and uniform sampling defined per element index,
// so results depend only on (shape, seed, offset) and match the GPU backend bit for bit.
#include "runtime/kernel_util.h"
#include "runtime/kernels.h"

namespace tracer::rt {
using namespace detail;

namespace {
constexpr uint32_t kMul0 = 0xD2511F53, kMul1 = 0xCD9E8D57;
constexpr uint32_t kWeyl0 = 0x9E3779B9, kWeyl1 = 0xBB67AE85;

inline void mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  uint64_t p = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
}
}  // namespace

void philox4x32_10(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]) {
  uint32_t c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += kWeyl0;
      k1 += kWeyl1;
    }
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kMul0, c0, hi0, lo0);
    mulhilo(kMul1, c2, hi1, lo1);
    uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

namespace {
// Elements [start, start + n) of the draw: element e is word e % 4 of block e / 4.
template <class T, class M>
void fill_uniform(T* out, int64_t n, M low, M high, uint64_t seed, uint64_t offset, uint64_t start) {
  const uint32_t key[2] = {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
  uint64_t first = start / 4, last = (start + static_cast<uint64_t>(n) + 3) / 4;
  int64_t blocks = static_cast<int64_t>(last - first);
  M scale = high - low;
#pragma omp parallel for schedule(static) if (n > 32768)
  for (int64_t b = 0; b < blocks; ++b) {
    uint64_t uj = first + static_cast<uint64_t>(b);
    const uint32_t ctr[4] = {static_cast<uint32_t>(uj), static_cast<uint32_t>(uj >> 32),
                             static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32)};
    uint32_t r[4];
    philox4x32_10(ctr, key, r);
    for (int w = 0; w < 4; ++w) {
      uint64_t e = uj * 4 + static_cast<uint64_t>(w);
      if (e < start || e >= start + static_cast<uint64_t>(n)) continue;
      // 24 random bits scaled by 2^-24 is exact in f32 and always below 1.
      M u = static_cast<M>(r[w] >> 8) * static_cast<M>(1.0 / 16777216.0);
      out[e - start] = convert<T>(low + scale * u);
    }
  }
}
}  // namespace

Tensor uniform_philox(const Shape& shape, double low, double high, DType dt, uint64_t seed,
                      uint64_t offset, Allocator* al, uint64_t start) {
  Tensor out = Tensor::empty(dt, shape, al);
  dispatch(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (dt == DType::f64)
      fill_uniform<T, double>(out.data_as<T>(), out.numel(), low, high, seed, offset, start);
    else
      fill_uniform<T, float>(out.data_as<T>(), out.numel(), static_cast<float>(low),
                             static_cast<float>(high), seed, offset, start);
  });
  return out;
}

}  // namespace tracer::rt
