// The device-side helpers every generated kernel starts with (CUDA C++ as a string). They mirror
// the CPU kernels' semantics (runtime/kernels_elementwise.cpp, runtime/kernel_util.h) so that GPU
// results can be compared with the CPU reference: bf16/f16 rounding to nearest even, integer
// arithmetic that wraps, division by zero on integers giving 0, Python-style remainder and
// floor division, NaN-propagating maximum and minimum, float-to-int conversion that truncates
// and saturates (NaN gives 0). No headers: NVRTC compiles it alone.
#pragma once

#include <string>

#include "cuda_special_source.h"  // generated: kTracerSpecialMathSource (runtime/special_math.inc)

namespace tracer::codegen {

inline const char* cuda_prelude() {
  static const std::string prelude = std::string(R"CUDA(// ---- tracer prelude ----
typedef unsigned short tr_bf16;
typedef unsigned short tr_f16;
typedef unsigned char tr_b8;

__device__ __forceinline__ float tr_from_bf16(tr_bf16 h) { return __uint_as_float(((unsigned int)h) << 16); }
// Round to nearest even, as the CPU's float_to_bf16 and float_to_half do; only
// NaN payloads may differ (the hardware returns the canonical NaN). Always the packed form
// (cvt.rn.bf16x2.f32, one F2FP instruction, sm_80 and later) with a zero in the other half: it issues on the
// integer pipe at full rate, where the one-value cvt.rn.bf16.f32 goes through the conversion unit
// at 16 results per clock and multiprocessor, which made rounding-heavy kernels compute-bound
// (bench/probes/round_probe.cu on the H200: 8 roundings per element took 0.51 ms one by one and
// 0.29 ms packed, the copy floor 0.28 ms).
__device__ __forceinline__ tr_bf16 tr_to_bf16(float f) {
#if __CUDA_ARCH__ >= 800
  unsigned int p;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(p) : "f"(0.0f), "f"(f));
  return (tr_bf16)p;
#else  // no bf16 conversion before sm_80: the same rounding in integer instructions
  const unsigned int x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (tr_bf16)0x7fff;
  return (tr_bf16)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
#endif
}
// The rounded value as a float: f's bf16 in the upper half, bf16(0) = 0 below.
__device__ __forceinline__ float tr_round_bf16(float f) {
#if __CUDA_ARCH__ >= 800
  unsigned int p;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(p) : "f"(f), "f"(0.0f));
  return __uint_as_float(p);
#else
  return __uint_as_float(((unsigned int)tr_to_bf16(f)) << 16);
#endif
}
// The bits of a value that a bf16 holds exactly (a 16-bit register of a group always does).
__device__ __forceinline__ tr_bf16 tr_bf16_bits(float f) { return (tr_bf16)(__float_as_uint(f) >> 16); }
__device__ __forceinline__ float tr_from_f16(tr_f16 h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
__device__ __forceinline__ tr_f16 tr_to_f16(float f) {
#if __CUDA_ARCH__ >= 800
  unsigned int p;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(p) : "f"(0.0f), "f"(f));
  return (tr_f16)p;
#else
  tr_f16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
#endif
}
// Rounds a float through f16 (an intermediate value of that dtype).
__device__ __forceinline__ float tr_round_f16(float f) { return tr_from_f16(tr_to_f16(f)); }

// Float to integer: truncate toward zero, saturate, NaN gives 0 (cvt.rzi.s64 does all three).
__device__ __forceinline__ long long tr_f2i(double x) { return x != x ? 0LL : (long long)x; }

__device__ __forceinline__ long long tr_wadd(long long a, long long b) { return (long long)((unsigned long long)a + (unsigned long long)b); }
__device__ __forceinline__ long long tr_wsub(long long a, long long b) { return (long long)((unsigned long long)a - (unsigned long long)b); }
__device__ __forceinline__ long long tr_wmul(long long a, long long b) { return (long long)((unsigned long long)a * (unsigned long long)b); }
__device__ __forceinline__ long long tr_idiv(long long a, long long b) { return b == 0 ? 0 : b == -1 ? tr_wsub(0, a) : a / b; }
__device__ __forceinline__ long long tr_imod(long long a, long long b) {
  if (b == 0 || b == -1) return 0;
  long long r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
__device__ __forceinline__ long long tr_ifloordiv(long long a, long long b) {
  if (b == 0) return 0;
  if (b == -1) return tr_wsub(0, a);
  long long q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
__device__ __forceinline__ long long tr_ipow(long long base, long long e) {
  if (e < 0) return base == 1 ? 1 : base == -1 ? (e % 2 ? -1 : 1) : 0;
  long long r = 1;
  while (e) {
    if (e & 1) r = tr_wmul(r, base);
    base = tr_wmul(base, base);
    e >>= 1;
  }
  return r;
}
__device__ __forceinline__ long long tr_iabs(long long a) { return a < 0 ? tr_wsub(0, a) : a; }

template <class C> __device__ __forceinline__ C tr_fmod_py(C a, C b) {
  C r = fmod(a, b);
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
template <class C> __device__ __forceinline__ C tr_ffloordiv(C a, C b) {
  if (b == 0) return a / b;
  C mod = fmod(a, b);
  C div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
  if (div == 0) return copysign(C(0), a / b);
  C fl = floor(div);
  return div - fl > C(0.5) ? fl + 1 : fl;
}
template <class C> __device__ __forceinline__ C tr_fmax(C a, C b) { return (a != a || b != b) ? a + b : (a > b ? a : b); }
template <class C> __device__ __forceinline__ C tr_fmin(C a, C b) { return (a != a || b != b) ? a + b : (a < b ? a : b); }
// The online sums' running maximum (codegen/cuda_rows.cpp): NaN if either is, as amax, in one
// instruction (max.NaN, sm_80 and later) where fmaxf and a NaN flag took three an element.
__device__ __forceinline__ float tr_max_nan(float a, float b) {
#if __CUDA_ARCH__ >= 800
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
#else
  return tr_fmax(a, b);
#endif
}
// e^d for an online sum's d = a - m <= 0, as 2^(d log2 e) from the special-function unit
// (ex2.approx.ftz: relative error below 2^-22; the product's rounding adds |d| 2^-24, largest
// for the terms that matter least, and results below 2^-126 are 0, where the sum holds at least
// e^0 = 1). Three instructions where expf takes about nine: the cross entropy's pass over
// 50304-wide rows was bound by its instructions, not by memory.
__device__ __forceinline__ float tr_exp_le0(float d) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(d * 1.4426950408889634f));
  return r;
}
// Shifts as PyTorch's: a left shift by a negative count or by 64 or more gives 0, a right shift
// the sign (0 or -1); the storage's narrower width wraps when stored, as on the CPU.
__device__ __forceinline__ long long tr_shl(long long a, long long b) {
  return (b < 0 || b >= 64) ? 0LL : (long long)((unsigned long long)a << b);
}
__device__ __forceinline__ long long tr_shr(long long a, long long b) { return (b < 0 || b >= 64) ? (a < 0 ? -1LL : 0LL) : a >> b; }
template <class C> __device__ __forceinline__ C tr_sign(C a) { return a != a ? a : C((a > 0) - (a < 0)); }

// Philox4x32-10 (runtime/kernels_random.cpp): element e of a draw is word e % 4 of the block
// e / 4 under counter (e / 4, offset) and key seed; u = (word >> 8) * 2^-24.
__device__ __forceinline__ uint4 tr_philox4(unsigned long long j, unsigned long long seed, unsigned long long offset) {
  unsigned int c0 = (unsigned int)j, c1 = (unsigned int)(j >> 32), c2 = (unsigned int)offset,
               c3 = (unsigned int)(offset >> 32);
  unsigned int k0 = (unsigned int)seed, k1 = (unsigned int)(seed >> 32);
#pragma unroll
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    // One 32x32->64 multiply gives both halves (mul.wide.u32: one IMAD.WIDE.U32 rather than an
    // IMAD.HI and an IMUL).
    unsigned long long p0, p1;
    asm("mul.wide.u32 %0, %1, %2;" : "=l"(p0) : "r"(0xD2511F53u), "r"(c0));
    asm("mul.wide.u32 %0, %1, %2;" : "=l"(p1) : "r"(0xCD9E8D57u), "r"(c2));
    unsigned int hi0 = (unsigned int)(p0 >> 32), lo0 = (unsigned int)p0;
    unsigned int hi1 = (unsigned int)(p1 >> 32), lo1 = (unsigned int)p1;
    unsigned int n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
  }
  return make_uint4(c0, c1, c2, c3);
}
__device__ __forceinline__ unsigned int tr_philox_word(unsigned long long e, unsigned long long seed,
                                                       unsigned long long offset) {
  uint4 r = tr_philox4(e >> 2, seed, offset);
  int w = (int)(e & 3);
  return w == 0 ? r.x : w == 1 ? r.y : w == 2 ? r.z : r.w;
}
__device__ __forceinline__ float tr_uniform_word_f32(unsigned int word, float low, float high) {
  float u = (float)(word >> 8) * (float)(1.0 / 16777216.0);
  return low + (high - low) * u;
}
__device__ __forceinline__ double tr_uniform_word_f64(unsigned int word, double low, double high) {
  double u = (double)(word >> 8) * (1.0 / 16777216.0);
  return low + (high - low) * u;
}

// Moves B bytes with the widest accesses the alignment allows (16 bytes when B is a multiple).
template <int B> __device__ __forceinline__ void tr_copy(void* dst, const void* src) {
  if constexpr (B % 16 == 0) {
#pragma unroll
    for (int j = 0; j < B / 16; ++j) reinterpret_cast<uint4*>(dst)[j] = reinterpret_cast<const uint4*>(src)[j];
  } else if constexpr (B == 8) {
    *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(src);
  } else if constexpr (B == 4) {
    *reinterpret_cast<unsigned int*>(dst) = *reinterpret_cast<const unsigned int*>(src);
  } else if constexpr (B == 2) {
    *reinterpret_cast<unsigned short*>(dst) = *reinterpret_cast<const unsigned short*>(src);
  } else {
#pragma unroll
    for (int j = 0; j < B; ++j) reinterpret_cast<unsigned char*>(dst)[j] = reinterpret_cast<const unsigned char*>(src)[j];
  }
}
// Digamma and the Hurwitz zeta function (runtime/special_math.inc, the CPU's own source).
#define TR_SF static __device__ __noinline__
#define TR_SF_INF __longlong_as_double(0x7ff0000000000000LL)
#define TR_SF_NAN __longlong_as_double(0x7ff8000000000000LL)
)CUDA") + kTracerSpecialMathSource + R"CUDA(
#undef TR_SF
#undef TR_SF_INF
#undef TR_SF_NAN
// ---- end of prelude ----
)CUDA";
  return prelude.c_str();
}

}  // namespace tracer::codegen
