// Flash-attention kernels (see cuda_attention.h). The CPU reference is runtime/kernels_attention.cpp:
// the same formulas, with the scores of a row in f32 and the probabilities rounded to the
// storage type before their product with the values (as flash attention does).
#include "codegen/cuda_attention.h"

#include <string>

#include "codegen/cuda_codegen.h"
#include "ir/op.h"

namespace tracer::codegen {
namespace {

using ir::DType;

// Helpers shared by the kernels: conversions, the tensor-core product, fragments read from
// shared memory, and tile loads. Fragment layouts are those of PTX's mma.m16n8k16 (lane = 4 * g +
// t/2): A's registers hold (g, t..t+1), (g+8, t..t+1), (g, t+8..t+9), (g+8, t+8..t+9); B's
// hold (t..t+1, g), (t+8..t+9, g); C's hold (g, t..t+1), (g+8, t..t+1).
std::string helpers(DType dt, int padded) {
  bool bf = dt == DType::bf16;
  std::string s = "typedef unsigned short tr_h;\n";
  s += "#define TR_D " + std::to_string(padded) + "\n";
  s += R"CUDA(#define TR_LD (TR_D + 8)   // shared-memory row of a [64, D] tile (padded against bank conflicts)
#define TR_PLD 72           // shared-memory row of a [.., 64] tile of probabilities
#define TR_INF __int_as_float(0x7f800000)
)CUDA";
  if (bf) {
    s += R"CUDA(__device__ __forceinline__ float tr_ld(tr_h h) { return __uint_as_float(((unsigned int)h) << 16); }
__device__ __forceinline__ tr_h tr_st(float f) {
  tr_h h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
#define TR_MMA "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
)CUDA";
  } else {
    s += R"CUDA(__device__ __forceinline__ float tr_ld(tr_h h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
__device__ __forceinline__ tr_h tr_st(float f) {
  tr_h h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
#define TR_MMA "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
)CUDA";
  }
  s += R"CUDA(// c (16 x 8, f32) += a (16 x 16) * b (16 x 8) on the tensor cores, one warp.
__device__ __forceinline__ void tr_mma(float* c, const unsigned* a, const unsigned* b) {
  asm volatile(TR_MMA " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ unsigned tr_pack(tr_h lo, tr_h hi) { return (unsigned)lo | ((unsigned)hi << 16); }
// The A fragment of the 16 x 16 tile at (r0, k0) of a matrix in shared memory whose element
// (r, k) is at A[r * ld + k] (T: at A[k * ld + r]).
template <bool T> __device__ __forceinline__ void tr_frag_a(const tr_h* A, int ld, int r0, int k0, unsigned* a) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = (lane & 3) * 2;
#define TR_AT(r, k) (T ? A[(k0 + (k)) * ld + r0 + (r)] : A[(r0 + (r)) * ld + k0 + (k)])
  a[0] = tr_pack(TR_AT(g, t), TR_AT(g, t + 1));
  a[1] = tr_pack(TR_AT(g + 8, t), TR_AT(g + 8, t + 1));
  a[2] = tr_pack(TR_AT(g, t + 8), TR_AT(g, t + 9));
  a[3] = tr_pack(TR_AT(g + 8, t + 8), TR_AT(g + 8, t + 9));
#undef TR_AT
}
// The B fragment of the 16 x 8 tile at (k0, n0): element (k, n) at B[k * ld + n] (T: B[n * ld + k]).
template <bool T> __device__ __forceinline__ void tr_frag_b(const tr_h* B, int ld, int k0, int n0, unsigned* b) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = (lane & 3) * 2;
#define TR_BT(k, n) (T ? B[(n0 + (n)) * ld + k0 + (k)] : B[(k0 + (k)) * ld + n0 + (n)])
  b[0] = tr_pack(TR_BT(t, g), TR_BT(t + 1, g));
  b[1] = tr_pack(TR_BT(t + 8, g), TR_BT(t + 9, g));
#undef TR_BT
}
// Rows [r0, r0 + 64) of a [rows, E] matrix into a [64, TR_LD] tile, zero outside the matrix
// (rows past the end, columns past E up to TR_D). 16-byte loads when E allows.
__device__ __forceinline__ void tr_tile(tr_h* dst, const tr_h* __restrict__ src, int r0, int rows, int E) {
  constexpr int C8 = TR_D / 8;
  for (int x = threadIdx.x; x < 64 * C8; x += blockDim.x) {
    const int r = x / C8, c = (x % C8) * 8;
    const bool in_rows = r0 + r < rows;
    if (in_rows && (E & 7) == 0 && c + 8 <= E) {
      *reinterpret_cast<uint4*>(dst + r * TR_LD + c) = *reinterpret_cast<const uint4*>(src + (long long)(r0 + r) * E + c);
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) dst[r * TR_LD + c + j] = (in_rows && c + j < E) ? src[(long long)(r0 + r) * E + c + j] : (tr_h)0;
    }
  }
}
)CUDA";
  return s;
}

std::string finish(std::string text, AttentionKernel* k) {
  k->symbol = name_by_hash(text);
  return text;
}

}  // namespace

int attention_padded(int64_t head) { return static_cast<int>((head + 15) / 16 * 16); }

bool attention_on_gpu(const ir::Stmt& s, std::string* why) {
  auto no = [&](const std::string& w) {
    if (why) *why = w;
    return false;
  };
  if (s.kind != ir::StmtKind::Prim || !s.op || (s.op->name != "attention" && s.op->name != "attention_backward"))
    return no("not an attention statement");
  bool bw = s.op->name == "attention_backward";
  size_t first = bw ? 1 : 0;
  if (s.args.size() < first + 5) return no("too few arguments");
  for (size_t i = first; i < first + 3; ++i)
    if (s.args[i].kind != ir::Arg::Kind::Proxy) return no("query, key and value must be tensors");
  const ir::TensorType &q = s.args[first].proxy->type, &k = s.args[first + 1].proxy->type, &v = s.args[first + 2].proxy->type;
  if (q.dtype != DType::bf16 && q.dtype != DType::f16) return no("the attention kernels take bf16 and f16 (this is " + std::string(rt::dtype_name(q.dtype)) + ")");
  int64_t E = q.shape.back(), L = q.shape[q.shape.size() - 2], S = k.shape[k.shape.size() - 2];
  if (v.shape.back() != E) return no("the value's head size differs from the query's");
  if (E > 128) return no("head size " + std::to_string(E) + " is above the kernels' 128");
  if (E < 1 || L < 1 || S < 1) return no("an empty attention");
  int64_t batch = rt::numel(q.shape) / (L * E);
  if (batch > 65535 || L > (1LL << 30) || S > (1LL << 30)) return no("too many heads or positions for one launch");
  return true;
}

AttentionKernel attention_forward_kernel(DType dt, int padded, bool causal) {
  AttentionKernel k;
  k.shared_bytes = static_cast<unsigned>((3 * 64 * (padded + 8) + 4 * 16 * 72) * 2);
  std::string s = "// prims.attention: flash attention forward, one block of 4 warps per 64 queries of one head;\n"
                  "// each warp owns 16 query rows and keeps their output, row maximum and row sum on chip.\n";
  s += helpers(dt, padded);
  s += std::string("#define TR_CAUSAL ") + (causal ? "1" : "0") + "\n";
  s += R"CUDA(extern "C" __global__ void __launch_bounds__(128) tr_kernel(const tr_h* __restrict__ q, const tr_h* __restrict__ k,
    const tr_h* __restrict__ v, tr_h* __restrict__ o, float* __restrict__ lse, int L, int S, int E, float scale_log2) {
  extern __shared__ __align__(16) unsigned char tr_smem[];
  tr_h* Ks = reinterpret_cast<tr_h*>(tr_smem);
  tr_h* Vs = Ks + 64 * TR_LD;
  tr_h* Qs = Vs + 64 * TR_LD;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = (lane & 3) * 2;
  tr_h* P = Qs + 64 * TR_LD + warp * 16 * TR_PLD;  // this warp's probabilities, [16, TR_PLD]
  const long long bh = blockIdx.y;
  const int qb0 = blockIdx.x * 64;
  q += bh * L * E;
  k += bh * S * E;
  v += bh * S * E;
  o += bh * L * E;
  lse += bh * L;
  tr_tile(Qs, q, qb0, L, E);
  __syncthreads();
  unsigned qa[TR_D / 16][4];
#pragma unroll
  for (int kk = 0; kk < TR_D / 16; ++kk) tr_frag_a<false>(Qs, TR_LD, warp * 16, kk * 16, qa[kk]);
  const int row0 = qb0 + warp * 16 + g, row1 = row0 + 8;
  float m0 = -TR_INF, m1 = -TR_INF, l0 = 0.f, l1 = 0.f;
  float acc[TR_D / 8][4];
#pragma unroll
  for (int d = 0; d < TR_D / 8; ++d) acc[d][0] = acc[d][1] = acc[d][2] = acc[d][3] = 0.f;
  const int kend = TR_CAUSAL ? min(S, qb0 + 64) : S;  // causal: key j is seen by queries i >= j
  for (int k0 = 0; k0 < kend; k0 += 64) {
    __syncthreads();  // the previous tiles are read by every warp
    tr_tile(Ks, k, k0, S, E);
    tr_tile(Vs, v, k0, S, E);
    __syncthreads();
    // Scores of this warp's 16 queries against 64 keys, in log2 units.
    float s[8][4];
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < TR_D / 16; ++kk) {
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        unsigned b[2];
        tr_frag_b<true>(Ks, TR_LD, kk * 16, nt * 8, b);
        tr_mma(s[nt], qa[kk], b);
      }
    }
    float mx0 = -TR_INF, mx1 = -TR_INF;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = k0 + nt * 8 + t + (e & 1), row = e < 2 ? row0 : row1;
        float x = s[nt][e] * scale_log2;
        if (col >= S || (TR_CAUSAL && col > row)) x = -TR_INF;
        s[nt][e] = x;
        if (e < 2) mx0 = fmaxf(mx0, x);
        else mx1 = fmaxf(mx1, x);
      }
    }
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    const float n0 = fmaxf(m0, mx0), n1 = fmaxf(m1, mx1);
    const float b0 = n0 == -TR_INF ? 0.f : n0, b1 = n1 == -TR_INF ? 0.f : n1;
    const float al0 = exp2f(m0 - b0), al1 = exp2f(m1 - b1);
    float sum0 = 0.f, sum1 = 0.f;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float p = exp2f(s[nt][e] - (e < 2 ? b0 : b1));
        s[nt][e] = p;
        if (e < 2) sum0 += p;
        else sum1 += p;
      }
    }
    sum0 += __shfl_xor_sync(0xffffffffu, sum0, 1);
    sum0 += __shfl_xor_sync(0xffffffffu, sum0, 2);
    sum1 += __shfl_xor_sync(0xffffffffu, sum1, 1);
    sum1 += __shfl_xor_sync(0xffffffffu, sum1, 2);
    l0 = l0 * al0 + sum0;
    l1 = l1 * al1 + sum1;
    m0 = n0;
    m1 = n1;
#pragma unroll
    for (int d = 0; d < TR_D / 8; ++d) {
      acc[d][0] *= al0;
      acc[d][1] *= al0;
      acc[d][2] *= al1;
      acc[d][3] *= al1;
    }
    // The probabilities, in the storage type, become the A operand of P @ V.
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
      P[g * TR_PLD + nt * 8 + t] = tr_st(s[nt][0]);
      P[g * TR_PLD + nt * 8 + t + 1] = tr_st(s[nt][1]);
      P[(g + 8) * TR_PLD + nt * 8 + t] = tr_st(s[nt][2]);
      P[(g + 8) * TR_PLD + nt * 8 + t + 1] = tr_st(s[nt][3]);
    }
    __syncwarp();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      unsigned a[4];
      tr_frag_a<false>(P, TR_PLD, 0, kk * 16, a);
#pragma unroll
      for (int d = 0; d < TR_D / 8; ++d) {
        unsigned b[2];
        tr_frag_b<false>(Vs, TR_LD, kk * 16, d * 8, b);
        tr_mma(acc[d], a, b);
      }
    }
    __syncwarp();
  }
  const float inv0 = l0 > 0.f ? 1.f / l0 : 0.f, inv1 = l1 > 0.f ? 1.f / l1 : 0.f;
#pragma unroll
  for (int d = 0; d < TR_D / 8; ++d) {
    const int col = d * 8 + t;
    if (row0 < L) {
      if (col < E) o[(long long)row0 * E + col] = tr_st(acc[d][0] * inv0);
      if (col + 1 < E) o[(long long)row0 * E + col + 1] = tr_st(acc[d][1] * inv0);
    }
    if (row1 < L) {
      if (col < E) o[(long long)row1 * E + col] = tr_st(acc[d][2] * inv1);
      if (col + 1 < E) o[(long long)row1 * E + col + 1] = tr_st(acc[d][3] * inv1);
    }
  }
  if (t == 0) {  // natural-log log-sum-exp of the scaled scores
    if (row0 < L) lse[row0] = l0 > 0.f ? (m0 + log2f(l0)) * 0.69314718055994531f : -TR_INF;
    if (row1 < L) lse[row1] = l1 > 0.f ? (m1 + log2f(l1)) * 0.69314718055994531f : -TR_INF;
  }
}
)CUDA";
  k.source = finish(std::move(s), &k);
  return k;
}

AttentionKernel attention_backward_kernel(DType dt, int padded, bool causal) {
  AttentionKernel k;
  k.shared_bytes = static_cast<unsigned>((4 * 64 * (padded + 8) + 2 * 64 * 72) * 2 + 2 * 64 * 4);
  std::string s = "// prims.attention_backward: flash attention backward, one block of 4 warps per 64 keys of one\n"
                  "// head; each warp owns 16 keys and accumulates their dk and dv on chip while the block walks\n"
                  "// the query tiles; dq is accumulated in f32 with atomics (scaled and converted afterwards).\n";
  s += helpers(dt, padded);
  s += std::string("#define TR_CAUSAL ") + (causal ? "1" : "0") + "\n";
  s += R"CUDA(extern "C" __global__ void __launch_bounds__(128) tr_kernel(const tr_h* __restrict__ q, const tr_h* __restrict__ k,
    const tr_h* __restrict__ v, const tr_h* __restrict__ dout, const float* __restrict__ lse, const float* __restrict__ delta,
    float* __restrict__ dq_acc, tr_h* __restrict__ dk, tr_h* __restrict__ dv, int L, int S, int E, float scale, float scale_log2) {
  extern __shared__ __align__(16) unsigned char tr_smem[];
  tr_h* Ks = reinterpret_cast<tr_h*>(tr_smem);
  tr_h* Vs = Ks + 64 * TR_LD;
  tr_h* Qs = Vs + 64 * TR_LD;
  tr_h* Gs = Qs + 64 * TR_LD;    // the output's gradient, rows of the query tile
  tr_h* Pt = Gs + 64 * TR_LD;    // probabilities, [64 keys, 64 queries]
  tr_h* Dt = Pt + 64 * TR_PLD;   // score gradients, [64 keys, 64 queries]
  float* lse_s = reinterpret_cast<float*>(Dt + 64 * TR_PLD);
  float* delta_s = lse_s + 64;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = (lane & 3) * 2;
  const long long bh = blockIdx.y;
  const int kb0 = blockIdx.x * 64;
  q += bh * L * E;
  k += bh * S * E;
  v += bh * S * E;
  dout += bh * L * E;
  lse += bh * L;
  delta += bh * L;
  dq_acc += bh * L * E;
  dk += bh * S * E;
  dv += bh * S * E;
  tr_tile(Ks, k, kb0, S, E);
  tr_tile(Vs, v, kb0, S, E);
  float dka[TR_D / 8][4], dva[TR_D / 8][4];
#pragma unroll
  for (int d = 0; d < TR_D / 8; ++d)
#pragma unroll
    for (int e = 0; e < 4; ++e) dka[d][e] = dva[d][e] = 0.f;
  const int key0 = kb0 + warp * 16 + g, key1 = key0 + 8;
  const int qstart = TR_CAUSAL ? kb0 : 0;  // causal: queries before the tile's first key see none of it
  for (int q0 = qstart; q0 < L; q0 += 64) {
    __syncthreads();  // the previous query tile is read by every warp
    tr_tile(Qs, q, q0, L, E);
    tr_tile(Gs, dout, q0, L, E);
    if (threadIdx.x < 64) {
      const int i = q0 + threadIdx.x;
      lse_s[threadIdx.x] = i < L ? lse[i] * 1.4426950408889634f : 0.f;
      delta_s[threadIdx.x] = i < L ? delta[i] : 0.f;
    }
    __syncthreads();
    // This warp's 16 keys against the 64 queries: scores (transposed) and dP^T = V dO^T.
    float st[8][4], dpt[8][4];
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) st[nt][e] = dpt[nt][e] = 0.f;
#pragma unroll
    for (int kk = 0; kk < TR_D / 16; ++kk) {
      unsigned ka[4], va[4];
      tr_frag_a<false>(Ks, TR_LD, warp * 16, kk * 16, ka);
      tr_frag_a<false>(Vs, TR_LD, warp * 16, kk * 16, va);
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        unsigned b[2];
        tr_frag_b<true>(Qs, TR_LD, kk * 16, nt * 8, b);
        tr_mma(st[nt], ka, b);
        tr_frag_b<true>(Gs, TR_LD, kk * 16, nt * 8, b);
        tr_mma(dpt[nt], va, b);
      }
    }
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = e < 2 ? key0 : key1, qo = nt * 8 + t + (e & 1), qi = q0 + qo;
        const bool seen = qi < L && key < S && !(TR_CAUSAL && key > qi);
        const float p = seen ? exp2f(st[nt][e] * scale_log2 - lse_s[qo]) : 0.f;
        const float ds = p * (dpt[nt][e] - delta_s[qo]);
        const int r = warp * 16 + g + (e < 2 ? 0 : 8);
        Pt[r * TR_PLD + qo] = tr_st(p);
        Dt[r * TR_PLD + qo] = tr_st(ds);
      }
    }
    __syncwarp();
    // dV += P^T dO and dK += dS^T Q for this warp's keys.
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      unsigned pa[4], sa[4];
      tr_frag_a<false>(Pt, TR_PLD, warp * 16, kk * 16, pa);
      tr_frag_a<false>(Dt, TR_PLD, warp * 16, kk * 16, sa);
#pragma unroll
      for (int d = 0; d < TR_D / 8; ++d) {
        unsigned b[2];
        tr_frag_b<false>(Gs, TR_LD, kk * 16, d * 8, b);
        tr_mma(dva[d], pa, b);
        tr_frag_b<false>(Qs, TR_LD, kk * 16, d * 8, b);
        tr_mma(dka[d], sa, b);
      }
    }
    __syncthreads();  // every warp's score gradients are written
    // dQ += dS K for 16 of the tile's queries per warp (dS read transposed from Dt).
    const int qr = warp * 16;
    const int i0 = q0 + qr + g, i1 = i0 + 8;
#pragma unroll
    for (int d = 0; d < TR_D / 8; ++d) {
      float c[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        unsigned a[4], b[2];
        tr_frag_a<true>(Dt, TR_PLD, qr, kk * 16, a);
        tr_frag_b<false>(Ks, TR_LD, kk * 16, d * 8, b);
        tr_mma(c, a, b);
      }
      const int col = d * 8 + t;
      if (i0 < L) {
        if (col < E) atomicAdd(dq_acc + (long long)i0 * E + col, c[0]);
        if (col + 1 < E) atomicAdd(dq_acc + (long long)i0 * E + col + 1, c[1]);
      }
      if (i1 < L) {
        if (col < E) atomicAdd(dq_acc + (long long)i1 * E + col, c[2]);
        if (col + 1 < E) atomicAdd(dq_acc + (long long)i1 * E + col + 1, c[3]);
      }
    }
  }
#pragma unroll
  for (int d = 0; d < TR_D / 8; ++d) {
    const int col = d * 8 + t;
    if (key0 < S) {
      if (col < E) {
        dk[(long long)key0 * E + col] = tr_st(dka[d][0] * scale);
        dv[(long long)key0 * E + col] = tr_st(dva[d][0]);
      }
      if (col + 1 < E) {
        dk[(long long)key0 * E + col + 1] = tr_st(dka[d][1] * scale);
        dv[(long long)key0 * E + col + 1] = tr_st(dva[d][1]);
      }
    }
    if (key1 < S) {
      if (col < E) {
        dk[(long long)key1 * E + col] = tr_st(dka[d][2] * scale);
        dv[(long long)key1 * E + col] = tr_st(dva[d][2]);
      }
      if (col + 1 < E) {
        dk[(long long)key1 * E + col + 1] = tr_st(dka[d][3] * scale);
        dv[(long long)key1 * E + col + 1] = tr_st(dva[d][3]);
      }
    }
  }
}
)CUDA";
  k.source = finish(std::move(s), &k);
  return k;
}

AttentionKernel attention_delta_kernel(DType dt) {
  AttentionKernel k;
  k.block = 256;
  std::string s = "// prims.attention_backward, first step: delta[r] = sum_e grad[r, e] * out[r, e], one warp per row;\n"
                  "// it also zeroes the row of dq's f32 accumulator.\n";
  s += helpers(dt, 16);
  s += R"CUDA(extern "C" __global__ void __launch_bounds__(256) tr_kernel(const tr_h* __restrict__ dout, const tr_h* __restrict__ o,
    float* __restrict__ delta, float* __restrict__ dq_acc, long long rows, int E) {
  const long long r = (long long)blockIdx.x * 8 + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (r >= rows) return;
  float s = 0.f;
  for (int c = lane; c < E; c += 32) {
    s += tr_ld(dout[r * E + c]) * tr_ld(o[r * E + c]);
    dq_acc[r * E + c] = 0.f;
  }
#pragma unroll
  for (int w = 16; w > 0; w >>= 1) s += __shfl_xor_sync(0xffffffffu, s, w);
  if (lane == 0) delta[r] = s;
}
)CUDA";
  k.source = finish(std::move(s), &k);
  return k;
}

AttentionKernel attention_dq_kernel(DType dt) {
  AttentionKernel k;
  k.block = 256;
  std::string s = "// prims.attention_backward, last step: dq = dq_acc * scale in the storage type.\n";
  s += helpers(dt, 16);
  s += R"CUDA(extern "C" __global__ void __launch_bounds__(256) tr_kernel(const float* __restrict__ acc, tr_h* __restrict__ dq,
    long long n, float scale) {
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    dq[i] = tr_st(acc[i] * scale);
}
)CUDA";
  k.source = finish(std::move(s), &k);
  return k;
}

}  // namespace tracer::codegen
