// Flash-attention kernels (see cuda_attention.h). The CPU reference is runtime/kernels_attention.cpp:
// the same formulas with the scores of a row in f32. The flash kernels round the probabilities
// (and the score gradients) to the storage type before their products, as flash attention does;
// the CPU and the rows kernels keep them in f32.
#include "codegen/cuda_attention.h"

#include <string>

#include "codegen/cuda_codegen.h"
#include "codegen/cuda_prelude.h"
#include "ir/op.h"

namespace tracer::codegen {
namespace {

using ir::DType;

// The prelude (conversions that round as the CPU does), the storage type tr_t of dt and the math
// type tr_a (f32; f64 for f64), with tr_ld (storage to math) and tr_st (math to storage, rounded).
std::string storage(DType dt) {
  std::string s = std::string(cuda_prelude()) + "\n";
  switch (dt) {
    case DType::f64: return s + "typedef double tr_t;\ntypedef double tr_a;\n"
                                "__device__ __forceinline__ tr_a tr_ld(tr_t x) { return x; }\n"
                                "__device__ __forceinline__ tr_t tr_st(tr_a x) { return x; }\n";
    case DType::f32: return s + "typedef float tr_t;\ntypedef float tr_a;\n"
                                "__device__ __forceinline__ tr_a tr_ld(tr_t x) { return x; }\n"
                                "__device__ __forceinline__ tr_t tr_st(tr_a x) { return x; }\n";
    case DType::bf16: return s + "typedef tr_bf16 tr_t;\ntypedef float tr_a;\n"
                                 "__device__ __forceinline__ tr_a tr_ld(tr_t x) { return tr_from_bf16(x); }\n"
                                 "__device__ __forceinline__ tr_t tr_st(tr_a x) { return tr_to_bf16(x); }\n";
    default: return s + "typedef tr_f16 tr_t;\ntypedef float tr_a;\n"
                        "__device__ __forceinline__ tr_a tr_ld(tr_t x) { return tr_from_f16(x); }\n"
                        "__device__ __forceinline__ tr_t tr_st(tr_a x) { return tr_to_f16(x); }\n";
  }
}

// Helpers shared by the kernels: conversions, the tensor-core product, fragments read from
// shared memory (ldmatrix), and tile loads. Fragment layouts are those of PTX's mma.m16n8k16
// (lane = 4 * g + t/2): A's registers hold (g, t..t+1), (g+8, t..t+1), (g, t+8..t+9), (g+8, t+8..t+9); B's
// hold (t..t+1, g), (t+8..t+9, g); C's hold (g, t..t+1), (g+8, t..t+1).
std::string helpers(DType dt, int padded) {
  std::string s = storage(dt) + "typedef tr_t tr_h;\n";
  s += "#define TR_D " + std::to_string(padded) + "\n";
  s += R"CUDA(#define TR_LD (TR_D + 8)   // shared-memory row of a [64, D] tile (padded against bank conflicts)
#define TR_PLD 72           // shared-memory row of a [.., 64] tile of probabilities
#define TR_INF __int_as_float(0x7f800000)
)CUDA";
  s += dt == DType::bf16 ? "#define TR_MMA \"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32\"\n"
                         : "#define TR_MMA \"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32\"\n";
  s += R"CUDA(// c (16 x 8, f32) += a (16 x 16) * b (16 x 8) on the tensor cores, one warp.
__device__ __forceinline__ void tr_mma(float* c, const unsigned* a, const unsigned* b) {
  asm volatile(TR_MMA " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ __forceinline__ unsigned tr_pack(tr_h lo, tr_h hi) { return (unsigned)lo | ((unsigned)hi << 16); }
__device__ __forceinline__ unsigned tr_saddr(const tr_h* p) { return (unsigned)__cvta_generic_to_shared(p); }
// Fragments from shared memory by ldmatrix (8 x 8 blocks of 16-bit values; every lane gives the
// address of one 16-byte row). The A fragment of the 16 x 16 tile at (r0, k0) of a matrix
// stored [r][k]:
__device__ __forceinline__ void tr_ldsm_a(const tr_h* A, int ld, int r0, int k0, unsigned* a) {
  const int l = threadIdx.x & 31;
  const unsigned p = tr_saddr(A + (r0 + (l & 15)) * ld + k0 + (l >> 4) * 8);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "r"(p));
}
// ... of a matrix stored transposed, [k][r]:
__device__ __forceinline__ void tr_ldsm_a_t(const tr_h* A, int ld, int r0, int k0, unsigned* a) {
  const int l = threadIdx.x & 31, i = l >> 3;
  const unsigned p = tr_saddr(A + (k0 + (l & 7) + (i >> 1) * 8) * ld + r0 + (i & 1) * 8);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "r"(p));
}
// The B fragments of the two 16 x 8 tiles at (k0, n0) and (k0, n0 + 8) (b[0..1] and b[2..3]) of a
// matrix stored [n][k]:
__device__ __forceinline__ void tr_ldsm_b_nk(const tr_h* B, int ld, int k0, int n0, unsigned* b) {
  const int l = threadIdx.x & 31, i = l >> 3;
  const unsigned p = tr_saddr(B + (n0 + (l & 7) + (i >> 1) * 8) * ld + k0 + (i & 1) * 8);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3]) : "r"(p));
}
// ... of a matrix stored [k][n]:
__device__ __forceinline__ void tr_ldsm_b_kn(const tr_h* B, int ld, int k0, int n0, unsigned* b) {
  const int l = threadIdx.x & 31, i = l >> 3;
  const unsigned p = tr_saddr(B + (k0 + (l & 7) + (i & 1) * 8) * ld + n0 + (i >> 1) * 8);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3]) : "r"(p));
}
// The A fragment (16 x 16) made of two C fragments (16 x 8) of adjacent column tiles, rounded to
// the storage type: a product's result feeds the next product without shared memory.
__device__ __forceinline__ void tr_c_to_a(const float* c0, const float* c1, unsigned* a) {
  a[0] = tr_pack(tr_st(c0[0]), tr_st(c0[1]));
  a[1] = tr_pack(tr_st(c0[2]), tr_st(c0[3]));
  a[2] = tr_pack(tr_st(c1[0]), tr_st(c1[1]));
  a[3] = tr_pack(tr_st(c1[2]), tr_st(c1[3]));
}
// Starts copying rows [r0, r0 + 64) of a [rows, E] matrix into a [64, TR_LD] tile, zero outside
// the matrix (rows past the end, columns past E up to TR_D): 16-byte cp.async copies when E is a
// multiple of 8 (complete after tr_commit and tr_wait), else plain loads and stores.
__device__ __forceinline__ void tr_tile(tr_h* dst, const tr_h* __restrict__ src, int r0, int rows, int E) {
  constexpr int C8 = TR_D / 8;
  for (int x = threadIdx.x; x < 64 * C8; x += blockDim.x) {
    const int r = x / C8, c = (x % C8) * 8;
    const bool in_rows = r0 + r < rows;
    if ((E & 7) == 0) {
      const bool in = in_rows && c < E;
      const tr_h* from = in ? src + (long long)(r0 + r) * E + c : src;  // 0 bytes read: zero fill
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(tr_saddr(dst + r * TR_LD + c)), "l"(from),
                   "r"(in ? 16 : 0));
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) dst[r * TR_LD + c + j] = (in_rows && c + j < E) ? src[(long long)(r0 + r) * E + c + j] : (tr_h)0;
    }
  }
}
// p[0] += a and p[1] += b for columns col and col + 1 of a row of E values: one vector reduction
// (8-byte aligned: E and col even) where both columns exist, else scalar atomics.
__device__ __forceinline__ void tr_add2(float* p, float a, float b, int col, int E) {
#if __CUDA_ARCH__ >= 900  // vector reductions are sm_90's
  if ((E & 1) == 0 && col + 1 < E) {
    asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(p), "f"(a), "f"(b) : "memory");
  } else
#endif
  {
    if (col < E) atomicAdd(p, a);
    if (col + 1 < E) atomicAdd(p + 1, b);
  }
}
__device__ __forceinline__ void tr_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most N committed groups of copies are still in flight.
template <int N> __device__ __forceinline__ void tr_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }
)CUDA";
  return s;
}

// The body of the (last) kernel in text compiled only for sm_80 and later (ldmatrix, cp.async
// and the bf16 products are sm_80's): `tracer compile --arch sm_75` still succeeds, and the
// executor runs the rows kernels on such devices.
std::string sm80_only(std::string text) {
  size_t k = text.rfind("extern \"C\" __global__");
  size_t open = text.find(") {\n", k);
  text.insert(open + 4, "#if __CUDA_ARCH__ >= 800\n");
  size_t close = text.rfind("}\n");
  text.insert(close, "#endif\n");
  return text;
}

std::string finish(std::string text, AttentionKernel* k) {
  k->symbol = name_by_hash(text);
  return text;
}

}  // namespace

int attention_padded(int64_t head) { return static_cast<int>((head + 15) / 16 * 16); }

// Q and two [K, V] tile pairs; K, V, two [Q, dO] pairs, dS^T and two [lse, delta] rows.
unsigned attention_forward_shared(int padded) { return static_cast<unsigned>(5 * 64 * (padded + 8) * 2); }
unsigned attention_backward_shared(int padded) {
  return static_cast<unsigned>((6 * 64 * (padded + 8) + 64 * 72) * 2 + 4 * 64 * 4);
}

bool attention_masked(const ir::Stmt& s) {
  if (s.kind != ir::StmtKind::Prim || !s.op) return false;
  const size_t at = s.op->name == "attention" ? 5 : s.op->name == "attention_backward" ? 8 : 0;
  return at > 0 && s.args.size() > at && s.args[at].kind != ir::Arg::Kind::None;
}

AttentionPath attention_path(const ir::Stmt& s, std::string* why) {
  auto no = [&](const std::string& w) {
    if (why) *why = w;
    return AttentionPath::None;
  };
  if (s.kind != ir::StmtKind::Prim || !s.op || (s.op->name != "attention" && s.op->name != "attention_backward"))
    return no("not an attention statement");
  bool bw = s.op->name == "attention_backward";
  size_t first = bw ? 1 : 0;
  if (s.args.size() < first + 5) return no("too few arguments");
  const bool masked = attention_masked(s);
  for (size_t i = first; i < first + 3; ++i)
    if (s.args[i].kind != ir::Arg::Kind::Proxy) return no("query, key and value must be tensors");
  const ir::TensorType &q = s.args[first].proxy->type, &k = s.args[first + 1].proxy->type, &v = s.args[first + 2].proxy->type;
  if (!rt::is_float(q.dtype)) return no("attention needs a float dtype");
  int64_t E = q.shape.back(), Ev = v.shape.back(), L = q.shape[q.shape.size() - 2], S = k.shape[k.shape.size() - 2];
  if (E < 1 || Ev < 1 || L < 1 || S < 1) return no("an empty attention");
  int64_t batch = rt::numel(q.shape) / (L * E);
  if (L > (1LL << 30) || S > (1LL << 30)) return no("too many positions for one launch");
  bool sixteen = q.dtype == DType::bf16 || q.dtype == DType::f16;
  // (A mask: the rows kernels, which read it; the flash kernels take none.)
  if (sixteen && Ev == E && E <= 128 && batch <= 65535 && !masked) return AttentionPath::Flash;
  if (E > 512 || Ev > 512) return no("head size above 512");
  return AttentionPath::Rows;
}

AttentionPath attention_path_for(const ir::Stmt& s, int compute_major, long long max_shared_bytes) {
  AttentionPath path = attention_path(s);
  if (path != AttentionPath::Flash) return path;
  const bool bw = s.op->name == "attention_backward";
  int padded = attention_padded(s.args[bw ? 1 : 0].proxy->type.shape.back());
  long long need = bw ? attention_backward_shared(padded) : attention_forward_shared(padded);
  return compute_major < 8 || need > max_shared_bytes ? AttentionPath::Rows : AttentionPath::Flash;
}

AttentionKernel attention_forward_kernel(DType dt, int padded, bool causal) {
  AttentionKernel k;
  k.shared_bytes = attention_forward_shared(padded);
  std::string s = "// prims.attention: flash attention forward, one block of 4 warps per 64 queries of one head;\n"
                  "// each warp owns 16 query rows and keeps their output, row maximum and row sum on chip.\n";
  s += helpers(dt, padded);
  s += std::string("#define TR_CAUSAL ") + (causal ? "1" : "0") + "\n";
  s += R"CUDA(extern "C" __global__ void __launch_bounds__(128) tr_kernel(const tr_h* __restrict__ q, const tr_h* __restrict__ k,
    const tr_h* __restrict__ v, tr_h* __restrict__ o, float* __restrict__ lse, int L, int S, int E, float scale_log2) {
  extern __shared__ __align__(16) unsigned char tr_smem[];
  tr_h* Qs = reinterpret_cast<tr_h*>(tr_smem);
  tr_h* KV = Qs + 64 * TR_LD;  // two buffers of [K tile, V tile]: the next pair loads during this one's products
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = (lane & 3) * 2;
  const long long bh = blockIdx.y;
  const int qb0 = blockIdx.x * 64;
  q += bh * L * E;
  k += bh * S * E;
  v += bh * S * E;
  o += bh * L * E;
  lse += bh * L;
  const int kend = TR_CAUSAL ? min(S, qb0 + 64) : S;  // causal: key j is seen by queries i >= j
  tr_tile(Qs, q, qb0, L, E);
  tr_tile(KV, k, 0, S, E);
  tr_tile(KV + 64 * TR_LD, v, 0, S, E);
  tr_commit();
  tr_wait<0>();
  __syncthreads();
  unsigned qa[TR_D / 16][4];
#pragma unroll
  for (int kk = 0; kk < TR_D / 16; ++kk) tr_ldsm_a(Qs, TR_LD, warp * 16, kk * 16, qa[kk]);
  const int row0 = qb0 + warp * 16 + g, row1 = row0 + 8;
  float m0 = -TR_INF, m1 = -TR_INF, l0 = 0.f, l1 = 0.f;
  float acc[TR_D / 8][4];
#pragma unroll
  for (int d = 0; d < TR_D / 8; ++d) acc[d][0] = acc[d][1] = acc[d][2] = acc[d][3] = 0.f;
  for (int k0 = 0, buf = 0; k0 < kend; k0 += 64, buf ^= 1) {
    const tr_h* Ks = KV + buf * 128 * TR_LD;
    const tr_h* Vs = Ks + 64 * TR_LD;
    if (k0 + 64 < kend) {  // the next tiles, into the other buffer (free since the last barrier)
      tr_h* next = KV + (buf ^ 1) * 128 * TR_LD;
      tr_tile(next, k, k0 + 64, S, E);
      tr_tile(next + 64 * TR_LD, v, k0 + 64, S, E);
    }
    tr_commit();
    tr_wait<1>();  // this iteration's tiles have arrived
    __syncthreads();
    // Scores of this warp's 16 queries against 64 keys, in log2 units.
    float s[8][4];
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < TR_D / 16; ++kk) {
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        unsigned b[4];
        tr_ldsm_b_nk(Ks, TR_LD, kk * 16, np * 16, b);
        tr_mma(s[2 * np], qa[kk], b);
        tr_mma(s[2 * np + 1], qa[kk], b + 2);
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
    // The probabilities, in the storage type, are the A operand of P @ V straight from registers.
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      unsigned a[4];
      tr_c_to_a(s[2 * kk], s[2 * kk + 1], a);
#pragma unroll
      for (int dp = 0; dp < TR_D / 16; ++dp) {
        unsigned b[4];
        tr_ldsm_b_kn(Vs, TR_LD, kk * 16, dp * 16, b);
        tr_mma(acc[2 * dp], a, b);
        tr_mma(acc[2 * dp + 1], a, b + 2);
      }
    }
    __syncthreads();  // every warp is done with this buffer before it is loaded again
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
  k.source = finish(sm80_only(std::move(s)), &k);
  return k;
}

AttentionKernel attention_backward_kernel(DType dt, int padded, bool causal) {
  AttentionKernel k;
  k.shared_bytes = attention_backward_shared(padded);
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
  tr_h* QG = Vs + 64 * TR_LD;    // two buffers of [Q tile, dO tile]: the next pair loads during this one's products
  tr_h* Dt = QG + 4 * 64 * TR_LD;  // score gradients, [64 keys, 64 queries] (dQ reads them transposed)
  float* LD_s = reinterpret_cast<float*>(Dt + 64 * TR_PLD);  // two buffers of [lse * log2(e), delta] per query
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
  const int qstart = TR_CAUSAL ? kb0 : 0;  // causal: queries before the tile's first key see none of it
  // One query tile's Q, dO, lse and delta into buffer b.
  auto load_queries = [&](int q0, int b) {
    tr_h* to = QG + b * 128 * TR_LD;
    tr_tile(to, q, q0, L, E);
    tr_tile(to + 64 * TR_LD, dout, q0, L, E);
    if (threadIdx.x < 64) {
      const int i = q0 + threadIdx.x;
      LD_s[b * 128 + threadIdx.x] = i < L ? lse[i] * 1.4426950408889634f : 0.f;
      LD_s[b * 128 + 64 + threadIdx.x] = i < L ? delta[i] : 0.f;
    }
  };
  tr_tile(Ks, k, kb0, S, E);
  tr_tile(Vs, v, kb0, S, E);
  if (qstart < L) load_queries(qstart, 0);
  tr_commit();
  float dka[TR_D / 8][4], dva[TR_D / 8][4];
#pragma unroll
  for (int d = 0; d < TR_D / 8; ++d)
#pragma unroll
    for (int e = 0; e < 4; ++e) dka[d][e] = dva[d][e] = 0.f;
  const int key0 = kb0 + warp * 16 + g, key1 = key0 + 8;
  for (int q0 = qstart, buf = 0; q0 < L; q0 += 64, buf ^= 1) {
    const tr_h* Qs = QG + buf * 128 * TR_LD;
    const tr_h* Gs = Qs + 64 * TR_LD;  // the output's gradient, rows of the query tile
    const float* lse_s = LD_s + buf * 128;
    const float* delta_s = lse_s + 64;
    // The next query tile, into the other buffer: its last readers (the previous iteration's
    // products) are behind that iteration's second barrier; its dQ reads only Dt and Ks.
    if (q0 + 64 < L) load_queries(q0 + 64, buf ^ 1);
    tr_commit();
    tr_wait<1>();
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
      tr_ldsm_a(Ks, TR_LD, warp * 16, kk * 16, ka);
      tr_ldsm_a(Vs, TR_LD, warp * 16, kk * 16, va);
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        unsigned b[4];
        tr_ldsm_b_nk(Qs, TR_LD, kk * 16, np * 16, b);
        tr_mma(st[2 * np], ka, b);
        tr_mma(st[2 * np + 1], ka, b + 2);
        tr_ldsm_b_nk(Gs, TR_LD, kk * 16, np * 16, b);
        tr_mma(dpt[2 * np], va, b);
        tr_mma(dpt[2 * np + 1], va, b + 2);
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
        st[nt][e] = p;
        dpt[nt][e] = ds;
        Dt[r * TR_PLD + qo] = tr_st(ds);
      }
    }
    // dV += P^T dO and dK += dS^T Q for this warp's keys (P^T and dS^T from registers).
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      unsigned pa[4], sa[4];
      tr_c_to_a(st[2 * kk], st[2 * kk + 1], pa);
      tr_c_to_a(dpt[2 * kk], dpt[2 * kk + 1], sa);
#pragma unroll
      for (int dp = 0; dp < TR_D / 16; ++dp) {
        unsigned b[4];
        tr_ldsm_b_kn(Gs, TR_LD, kk * 16, dp * 16, b);
        tr_mma(dva[2 * dp], pa, b);
        tr_mma(dva[2 * dp + 1], pa, b + 2);
        tr_ldsm_b_kn(Qs, TR_LD, kk * 16, dp * 16, b);
        tr_mma(dka[2 * dp], sa, b);
        tr_mma(dka[2 * dp + 1], sa, b + 2);
      }
    }
    __syncthreads();  // every warp's score gradients are written
    // dQ += dS K for 16 of the tile's queries per warp (dS read transposed from Dt).
    const int qr = warp * 16;
    const int i0 = q0 + qr + g, i1 = i0 + 8;
#pragma unroll
    for (int dp = 0; dp < TR_D / 16; ++dp) {
      float c[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        unsigned a[4], b[4];
        tr_ldsm_a_t(Dt, TR_PLD, qr, kk * 16, a);
        tr_ldsm_b_kn(Ks, TR_LD, kk * 16, dp * 16, b);
        tr_mma(c[0], a, b);
        tr_mma(c[1], a, b + 2);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int col = dp * 16 + h * 8 + t;
        if (i0 < L) tr_add2(dq_acc + (long long)i0 * E + col, c[h][0], c[h][1], col, E);
        if (i1 < L) tr_add2(dq_acc + (long long)i1 * E + col, c[h][2], c[h][3], col, E);
      }
    }
  }
  tr_wait<0>();  // no copy outlives the block (when it saw no query tile)
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
  k.source = finish(sm80_only(std::move(s)), &k);
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

namespace {

// The Rows path's helpers: storage and math types, conversions, a warp sum, and a row of a head
// held by the warp's lanes (element c of lane l is column 32 c + l).
std::string rows_helpers(DType dt, int64_t E, int64_t Ev) {
  std::string s;
  int J = static_cast<int>((E + 31) / 32), JV = static_cast<int>((Ev + 31) / 32);
  bool f64 = dt == DType::f64;
  s += storage(dt);
  s += std::string("typedef ") + (f64 ? "double" : "float") + " tr_l;   // lse and delta\n";
  s += "#define TR_J " + std::to_string(J) + "    // query/key values per lane\n";
  s += "#define TR_JV " + std::to_string(JV) + "   // value values per lane\n";
  s += std::string("#define TR_EXP ") + (f64 ? "exp" : "expf") + "\n";
  s += std::string("#define TR_LOG ") + (f64 ? "log" : "logf") + "\n";
  s += std::string("#define TR_NEG_INF ") + (f64 ? "__longlong_as_double(0xfff0000000000000LL)" : "__int_as_float(0xff800000)") + "\n";
  s += R"CUDA(__device__ __forceinline__ tr_a tr_warp_sum(tr_a x) {
#pragma unroll
  for (int w = 16; w > 0; w >>= 1) x += __shfl_xor_sync(0xffffffffu, x, w);
  return x;
}
// Row `row` of a [rows, n] matrix into the lanes' registers (zero past n).
template <int J> __device__ __forceinline__ void tr_row(const tr_t* __restrict__ m, long long row, int n, tr_a* x) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int c = 0; c < J; ++c) x[c] = 32 * c + lane < n ? tr_ld(m[row * n + 32 * c + lane]) : (tr_a)0;
}
// x += a * (row `row` of a [rows, n] matrix), and the lanes' x stored as that row.
template <int J> __device__ __forceinline__ void tr_axpy(tr_a* x, tr_a a, const tr_t* __restrict__ m, long long row, int n) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int c = 0; c < J; ++c)
    if (32 * c + lane < n) x[c] += a * tr_ld(m[row * n + 32 * c + lane]);
}
template <int J> __device__ __forceinline__ void tr_store_row(const tr_a* x, tr_a a, tr_t* __restrict__ m, long long row, int n) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int c = 0; c < J; ++c)
    if (32 * c + lane < n) m[row * n + 32 * c + lane] = tr_st(x[c] * a);
}
// The additive mask's term for query i and key j of batch b (0 without a mask): the mask in the
// math type, read through its batch offsets and its query and key strides (0 where it broadcasts).
__device__ __forceinline__ tr_a tr_mask_at(const tr_a* __restrict__ mask, const long long* __restrict__ moff, long long b,
                                           long long msL, long long msS, int i, int j) {
  return mask ? mask[moff[b] + i * msL + j * msS] : (tr_a)0;
}
template <int J> __device__ __forceinline__ tr_a tr_dot(const tr_a* x, const tr_t* __restrict__ m, long long row, int n) {
  const int lane = threadIdx.x & 31;
  tr_a s = 0;
#pragma unroll
  for (int c = 0; c < J; ++c)
    if (32 * c + lane < n) s += x[c] * tr_ld(m[row * n + 32 * c + lane]);
  return tr_warp_sum(s);
}
)CUDA";
  return s;
}

}  // namespace

AttentionKernel attention_rows_forward_kernel(DType dt, int64_t E, int64_t Ev) {
  AttentionKernel k;
  k.block = 256;
  std::string s = "// prims.attention, one warp per query row (online softmax over the keys, CUDA cores).\n";
  s += rows_helpers(dt, E, Ev);
  s += R"CUDA(extern "C" __global__ void __launch_bounds__(256) tr_kernel(const tr_t* __restrict__ q, const tr_t* __restrict__ k,
    const tr_t* __restrict__ v, tr_t* __restrict__ o, tr_l* __restrict__ lse, long long rows, int L, int S, int E, int Ev,
    tr_a scale, int causal, const tr_a* __restrict__ mask, const long long* __restrict__ moff, long long msL, long long msS) {
  const long long r = (long long)blockIdx.x * 8 + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (r >= rows) return;
  const long long b = r / L;
  const int i = (int)(r % L);
  const int n = causal ? min(S, i + 1) : S;  // keys j <= i (top-left aligned)
  tr_a qx[TR_J], acc[TR_JV];
  tr_row<TR_J>(q, r, E, qx);
#pragma unroll
  for (int c = 0; c < TR_JV; ++c) acc[c] = 0;
  tr_a m = TR_NEG_INF, l = 0;
  for (int j = 0; j < n; ++j) {
    const tr_a x = tr_dot<TR_J>(qx, k, b * S + j, E) * scale + tr_mask_at(mask, moff, b, msL, msS, i, j);
    if (x == TR_NEG_INF) continue;  // a masked key adds nothing
    const tr_a mn = x > m ? x : m;
    const tr_a alpha = TR_EXP(m - mn), p = TR_EXP(x - mn);
    l = l * alpha + p;
    m = mn;
#pragma unroll
    for (int c = 0; c < TR_JV; ++c) acc[c] *= alpha;
    tr_axpy<TR_JV>(acc, p, v, b * S + j, Ev);
  }
  // Every key masked: NaN, as softmax over -inf gives (and the CPU kernel).
  const tr_a nan = TR_NEG_INF - TR_NEG_INF;
  const bool none_kept = mask && n > 0 && !(l > 0);
  tr_store_row<TR_JV>(acc, none_kept ? nan : l > 0 ? (tr_a)1 / l : (tr_a)0, o, r, Ev);
  if (lane == 0) lse[r] = none_kept ? nan : n > 0 ? m + TR_LOG(l) : TR_NEG_INF;
}
)CUDA";
  k.source = finish(std::move(s), &k);
  return k;
}

AttentionKernel attention_rows_dq_kernel(DType dt, int64_t E, int64_t Ev) {
  AttentionKernel k;
  k.block = 256;
  std::string s = "// prims.attention_backward, dq: one warp per query row; also delta = rowsum(grad * out).\n";
  s += rows_helpers(dt, E, Ev);
  s += R"CUDA(extern "C" __global__ void __launch_bounds__(256) tr_kernel(const tr_t* __restrict__ g, const tr_t* __restrict__ q,
    const tr_t* __restrict__ k, const tr_t* __restrict__ v, const tr_t* __restrict__ o, const tr_l* __restrict__ lse,
    tr_l* __restrict__ delta, tr_t* __restrict__ dq, long long rows, int L, int S, int E, int Ev, tr_a scale, int causal,
    const tr_a* __restrict__ mask, const long long* __restrict__ moff, long long msL, long long msS) {
  const long long r = (long long)blockIdx.x * 8 + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (r >= rows) return;
  const long long b = r / L;
  const int i = (int)(r % L);
  const int n = causal ? min(S, i + 1) : S;
  tr_a qx[TR_J], gx[TR_JV], ox[TR_JV], dqx[TR_J];
  tr_row<TR_J>(q, r, E, qx);
  tr_row<TR_JV>(g, r, Ev, gx);
  tr_row<TR_JV>(o, r, Ev, ox);
  tr_a d = 0;
#pragma unroll
  for (int c = 0; c < TR_JV; ++c) d += gx[c] * ox[c];
  d = tr_warp_sum(d);
  if (lane == 0) delta[r] = d;
#pragma unroll
  for (int c = 0; c < TR_J; ++c) dqx[c] = 0;
  const tr_a ls = lse[r];
  for (int j = 0; j < n; ++j) {
    const tr_a p = TR_EXP(tr_dot<TR_J>(qx, k, b * S + j, E) * scale + tr_mask_at(mask, moff, b, msL, msS, i, j) - ls);
    const tr_a ds = p * (tr_dot<TR_JV>(gx, v, b * S + j, Ev) - d);
    tr_axpy<TR_J>(dqx, ds, k, b * S + j, E);
  }
  tr_store_row<TR_J>(dqx, scale, dq, r, E);
}
)CUDA";
  k.source = finish(std::move(s), &k);
  return k;
}

AttentionKernel attention_rows_dkdv_kernel(DType dt, int64_t E, int64_t Ev) {
  AttentionKernel k;
  k.block = 256;
  std::string s = "// prims.attention_backward, dk and dv: one warp per key row, over the queries that see it.\n";
  s += rows_helpers(dt, E, Ev);
  s += R"CUDA(extern "C" __global__ void __launch_bounds__(256) tr_kernel(const tr_t* __restrict__ g, const tr_t* __restrict__ q,
    const tr_t* __restrict__ k, const tr_t* __restrict__ v, const tr_l* __restrict__ lse, const tr_l* __restrict__ delta,
    tr_t* __restrict__ dk, tr_t* __restrict__ dv, long long key_rows, int L, int S, int E, int Ev, tr_a scale, int causal,
    const tr_a* __restrict__ mask, const long long* __restrict__ moff, long long msL, long long msS) {
  const long long r = (long long)blockIdx.x * 8 + (threadIdx.x >> 5);
  if (r >= key_rows) return;
  const long long b = r / S;
  const int j = (int)(r % S);
  tr_a kx[TR_J], vx[TR_JV], dkx[TR_J], dvx[TR_JV];
  tr_row<TR_J>(k, r, E, kx);
  tr_row<TR_JV>(v, r, Ev, vx);
#pragma unroll
  for (int c = 0; c < TR_J; ++c) dkx[c] = 0;
#pragma unroll
  for (int c = 0; c < TR_JV; ++c) dvx[c] = 0;
  for (int i = causal ? j : 0; i < L; ++i) {  // causal: queries i >= j see key j
    const long long qr = b * L + i;
    const tr_a p = TR_EXP(tr_dot<TR_J>(kx, q, qr, E) * scale + tr_mask_at(mask, moff, b, msL, msS, i, j) - lse[qr]);
    const tr_a ds = p * (tr_dot<TR_JV>(vx, g, qr, Ev) - delta[qr]);
    tr_axpy<TR_J>(dkx, ds, q, qr, E);
    tr_axpy<TR_JV>(dvx, p, g, qr, Ev);
  }
  tr_store_row<TR_J>(dkx, scale, dk, r, E);
  tr_store_row<TR_JV>(dvx, (tr_a)1, dv, r, Ev);
}
)CUDA";
  k.source = finish(std::move(s), &k);
  return k;
}

AttentionKernel attention_mask_kernel(DType mask_dtype, DType out) {
  AttentionKernel k;
  k.block = 256;
  std::string s = "// prims.attention's mask as an additive one of another dtype: a b8 mask as 0 (kept) or -inf, a float one converted.\n";
  s += std::string(cuda_prelude()) + "\n";
  std::string load, store;
  switch (mask_dtype) {
    case DType::b8: s += "typedef unsigned char tr_m;\n"; load = "(m[i] ? 0.0 : __longlong_as_double(0xfff0000000000000LL))"; break;
    case DType::f64: s += "typedef double tr_m;\n"; load = "m[i]"; break;
    case DType::f32: s += "typedef float tr_m;\n"; load = "(double)m[i]"; break;
    case DType::bf16: s += "typedef tr_bf16 tr_m;\n"; load = "(double)tr_from_bf16(m[i])"; break;
    default: s += "typedef tr_f16 tr_m;\n"; load = "(double)tr_from_f16(m[i])"; break;
  }
  switch (out) {
    case DType::f64: s += "typedef double tr_o;\n"; store = "v"; break;
    case DType::f32: s += "typedef float tr_o;\n"; store = "(float)v"; break;
    case DType::bf16: s += "typedef tr_bf16 tr_o;\n"; store = "tr_to_bf16((float)v)"; break;
    default: s += "typedef tr_f16 tr_o;\n"; store = "tr_to_f16((float)v)"; break;
  }
  s += "extern \"C\" __global__ void __launch_bounds__(256) tr_kernel(const tr_m* __restrict__ m, tr_o* __restrict__ out, long long n) {\n"
       "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {\n"
       "    const double v = " + load + ";\n    out[i] = " + store + ";\n  }\n}\n";
  k.source = finish(std::move(s), &k);
  return k;
}

}  // namespace tracer::codegen
