// Gather and scatter kernels (prims.take, take_backward, sort); see cuda_reduce.h. Split from
// cuda_reduce.cpp, whose reductions, layouts and fills share its helpers (cuda_reduce_detail.h).
#include <algorithm>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <sstream>

#include "codegen/cuda_codegen.h"
#include "codegen/cuda_prelude.h"
#include "codegen/cuda_reduce.h"
#include "codegen/cuda_reduce_detail.h"
#include "ir/op.h"
#include "ir/op_rules.h"
#include "runtime/kernels.h"

namespace tracer::codegen {
using ir::Arg;
using reduce_detail::finish;
using reduce_detail::load;
using rt::DType;

namespace {
// Records the first bad index of a gather or scatter: err[0] = 1, err[1] = the index,
// err[2] = the rows it had to fall in. The executor reads it after the run.
// err[0] says which op: 1 take, 2 take_backward.
const char* kIndexError =
    "__device__ __forceinline__ void tr_index_error(unsigned long long* err, long long ix, long long rows, unsigned long long op) {\n"
    "  if (atomicCAS(err, 0ULL, op) == 0ULL) {\n"
    "    err[1] = (unsigned long long)ix;\n"
    "    err[2] = (unsigned long long)rows;\n"
    "  }\n"
    "}\n";

// The type the CPU accumulates a scatter in (runtime/kernel_util.h math_of).
const char* math_name(DType d) { return d == DType::f64 ? "double" : rt::is_float(d) ? "float" : "long long"; }
}  // namespace

bool generate_take(const ir::Stmt& s, SimpleKernel* k, std::string* why) {
  if (s.args.size() < 2 || s.args[0].kind != Arg::Kind::Proxy || s.args[1].kind != Arg::Kind::Proxy) {
    *why = "take of something that is not a tensor";
    return false;
  }
  const ir::TensorType& a = s.args[0].proxy->type;
  const ir::TensorType& idx = s.args[1].proxy->type;
  const ir::TensorType& out = s.outputs[0]->type;
  const size_t d = s.args.size() > 2 ? static_cast<size_t>(ir::take_dim(s.args[0], s.args[2])) : 0;
  // y[o, j, c] = a[o, index[j], c]: o over a's dimensions before d, c over those after.
  long long n = rt::numel(out.shape), rows = a.shape.empty() ? 0 : a.shape[d], cols = 1, K = rt::numel(idx.shape);
  for (size_t k = d + 1; k < a.shape.size(); ++k) cols *= a.shape[k];
  if (n == 0 || cols == 0 || rows == 0) {
    *why = "the output is empty";
    return false;
  }
  std::ostringstream src;
  src << cuda_prelude() << "\n// prims.take: rows of " << storage_name(a.dtype) << rt::shape_str(a.shape) << " at "
      << storage_name(idx.dtype) << rt::shape_str(idx.shape) << "\n" << kIndexError;
  src << "extern \"C\" __global__ void __launch_bounds__(256) tr_kernel(const " << storage_name(a.dtype) << "* __restrict__ a, const "
      << storage_name(idx.dtype) << "* __restrict__ index, " << storage_name(out.dtype) << "* __restrict__ y, unsigned long long* err) {\n";
  src << "  const long long C = " << cols << "LL, ROWS = " << rows << "LL, K = " << K << "LL;\n";
  src << "  for (long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x; o < " << n << "LL; o += (long long)gridDim.x * blockDim.x) {\n";
  src << "    const long long jo = o / C;\n";
  src << "    const long long ix = (long long)index[jo % K];\n";
  src << "    if (ix < 0 || ix >= ROWS) {\n      tr_index_error(err, ix, ROWS, 1ULL);\n      y[o] = 0;\n      continue;\n    }\n";
  src << "    y[o] = a[((jo / K) * ROWS + ix) * C + o % C];\n  }\n}\n";
  std::string text = src.str();
  k->symbol = name_by_hash(text);
  k->source = std::move(text);
  k->threads = n;
  k->inputs = 2;
  k->checks_index = true;
  return true;
}

// Each line's keys (double for floats, long long for integers) and positions go to shared memory,
// padded to a power of two P with positions -1 that sort after everything; a bitonic network over
// (key, position) pairs, a strict total order, gives what the CPU's stable sort gives: equal keys
// keep their positions' order in either direction, NaN sorts above every number. Then the
// values are copied from the input at the sorted positions (the bytes themselves) and the
// positions written. One block a line, looping over the lines beyond the grid.
bool generate_sort(const ir::Stmt& s, SimpleKernel* k, std::string* why) {
  if (s.args.empty() || s.args[0].kind != Arg::Kind::Proxy || s.outputs.size() != 2) {
    *why = "sort of something that is not a tensor";
    return false;
  }
  const ir::TensorType& a = s.args[0].proxy->type;
  const int64_t rank = static_cast<int64_t>(a.shape.size());
  int64_t d = s.args.size() > 1 && s.args[1].kind == Arg::Kind::Int ? s.args[1].i : -1;
  if (d < 0) d += std::max<int64_t>(rank, 1);
  const bool desc = s.args.size() > 2 && s.args[2].kind == Arg::Kind::Bool && s.args[2].b;
  long long n = rank ? a.shape[static_cast<size_t>(d)] : 1, inner = 1, total = rt::numel(a.shape);
  for (int64_t j = d + 1; j < rank; ++j) inner *= a.shape[static_cast<size_t>(j)];
  if (total == 0 || n == 0) {
    *why = "the output is empty";
    return false;
  }
  long long P = 1;
  while (P < n) P <<= 1;
  if (P > 4096) {
    *why = "lines longer than 4096 elements sort on the host";
    return false;
  }
  if (const char* e = std::getenv("TRACER_SORT_HOST"); e && std::string(e) == "1") {  // (for measuring the kernel)
    *why = "TRACER_SORT_HOST=1";
    return false;
  }
  const long long lines = total / n;
  const bool fl = rt::is_float(a.dtype);
  const char* key_t = fl ? "double" : "long long";
  std::ostringstream src;
  src << cuda_prelude() << "\n// prims.sort of " << storage_name(a.dtype) << rt::shape_str(a.shape) << " along dimension " << d
      << (desc ? ", descending" : ", ascending") << ": " << lines << " lines of " << n << "\n";
  src << "__device__ __forceinline__ bool tr_before(" << key_t << " ka, int ia, " << key_t << " kb, int ib) {\n"
      << "  if (ia < 0) return false;\n  if (ib < 0) return true;\n";
  if (fl) src << "  const bool na = ka != ka, nb = kb != kb;\n  if (na || nb) return (na && nb) ? ia < ib : " << (desc ? "na" : "nb") << ";\n";
  src << "  if (ka != kb) return ka " << (desc ? ">" : "<") << " kb;\n  return ia < ib;\n}\n";
  src << "extern \"C\" __global__ void __launch_bounds__(512) tr_kernel(const " << storage_name(a.dtype) << "* __restrict__ a, "
      << storage_name(a.dtype) << "* __restrict__ y, long long* __restrict__ pos) {\n";
  src << "  extern __shared__ __align__(16) unsigned char tr_smem[];\n";
  src << "  " << key_t << "* key = reinterpret_cast<" << key_t << "*>(tr_smem);\n";
  src << "  int* ix = reinterpret_cast<int*>(key + " << P << ");\n";
  src << "  const long long N = " << n << "LL, INNER = " << inner << "LL;\n";
  src << "  for (long long line = blockIdx.x; line < " << lines << "LL; line += gridDim.x) {\n";
  src << "    const long long base = (line / INNER) * N * INNER + line % INNER;\n";
  src << "    for (int j = threadIdx.x; j < " << P << "; j += blockDim.x) {\n";
  src << "      if (j < N) {\n        key[j] = " << load(a.dtype, "a[base + j * INNER]") << ";\n        ix[j] = j;\n"
      << "      } else {\n        key[j] = 0;\n        ix[j] = -1;\n      }\n    }\n    __syncthreads();\n";
  src << "    for (int size = 2; size <= " << P << "; size <<= 1) {\n";
  src << "      for (int stride = size >> 1; stride > 0; stride >>= 1) {\n";
  src << "        for (int t = threadIdx.x; t < " << P / 2 << "; t += blockDim.x) {\n";
  src << "          const int lo = 2 * t - (t & (stride - 1)), hi = lo + stride;\n";
  src << "          if (tr_before(key[hi], ix[hi], key[lo], ix[lo]) == ((lo & size) == 0)) {\n";
  src << "            const " << key_t << " tk = key[lo];\n            key[lo] = key[hi];\n            key[hi] = tk;\n";
  src << "            const int ti = ix[lo];\n            ix[lo] = ix[hi];\n            ix[hi] = ti;\n          }\n        }\n";
  src << "        __syncthreads();\n      }\n    }\n";
  src << "    for (int j = threadIdx.x; j < N; j += blockDim.x) {\n";
  src << "      y[base + j * INNER] = a[base + (long long)ix[j] * INNER];\n      pos[base + j * INNER] = ix[j];\n    }\n";
  src << "    __syncthreads();\n  }\n}\n";
  std::string text = src.str();
  k->symbol = name_by_hash(text);
  k->source = std::move(text);
  k->threads = lines;
  k->block = static_cast<unsigned>(std::min<long long>(512, std::max<long long>(32, P / 2)));
  k->inputs = 1;
  k->sorts = true;
  k->shared_bytes = static_cast<unsigned>(P * (8 + 4));
  return true;
}

bool generate_take_backward(const ir::Stmt& s, SimpleKernel* k, std::string* why, bool accumulate) {
  if (s.args.size() < 3 || s.args[0].kind != Arg::Kind::Proxy || s.args[1].kind != Arg::Kind::Proxy) {
    *why = "take_backward of something that is not a tensor";
    return false;
  }
  const ir::TensorType& g = s.args[0].proxy->type;
  const ir::TensorType& idx = s.args[1].proxy->type;
  const ir::TensorType& out = s.outputs[0]->type;
  if (g.dtype == DType::b8) {
    *why = "a bool gradient (the CPU reports the error)";
    return false;
  }
  long long rows = out.shape.empty() ? 0 : out.shape[0], n_idx = rt::numel(idx.shape);
  long long cols = rows ? rt::numel(out.shape) / rows : 0;
  if (rows == 0 || cols == 0) {
    *why = "the output is empty";
    return false;
  }
  if (n_idx >= (1LL << 31) || rows >= (1LL << 31)) {
    *why = "more than 2^31 indices or rows";
    return false;
  }
  // A stable counting sort of the positions by index, then one block per row of the table adds
  // its rows of grad in index order in the math type, as the CPU does (the same numbers, bit for
  // bit), and converts once. Work: the table written once, grad read once.
  //   _1: zero the counts    _2: count each index (and report bad ones)    _3: exclusive scan
  //   _4: place each position in its row's segment (atomic cursor: any order)
  //   _5: per row, sort the segment's positions (ranks among at most TR_SORTED in shared memory;
  //       longer segments by a radix sort in global memory), then sum.
  const std::string acc_t = math_name(g.dtype);
  const std::string gt = storage_name(g.dtype), it = storage_name(idx.dtype), ot = storage_name(out.dtype);
  std::ostringstream src;
  src << cuda_prelude() << "\n// prims.take_backward: " << n_idx << " rows of " << gt << " added into " << rt::shape_str(out.shape)
      << (accumulate ? " (and into the addend already there)" : "")
      << " at " << it << " indices, in index order\n" << kIndexError;
  std::string params = "const " + gt + "* __restrict__ grad, const " + it + "* __restrict__ index, int* __restrict__ work, " + ot +
                       "* __restrict__ y, unsigned long long* err";
  src << "#define TR_N " << n_idx << "LL\n#define TR_ROWS " << rows << "LL\n#define TR_C " << cols << "LL\n#define TR_SORTED 2048\n";
  // work: counts[ROWS], start[ROWS + 1], cursor[ROWS], list[N], scratch[N]
  src << "extern \"C\" __global__ void __launch_bounds__(256) tr_kernel(" << params << ") {\n"
      << "  for (long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x; r < TR_ROWS; r += (long long)gridDim.x * blockDim.x) {\n"
      << "    work[r] = 0; work[2 * TR_ROWS + 1 + r] = 0;\n  }\n}\n";
  src << "extern \"C\" __global__ void __launch_bounds__(256) tr_kernel_2(" << params << ") {\n"
      << "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < TR_N; i += (long long)gridDim.x * blockDim.x) {\n"
      << "    const long long ix = (long long)index[i];\n"
      << "    if (ix < 0 || ix >= TR_ROWS) { tr_index_error(err, ix, TR_ROWS, 2ULL); continue; }\n"
      << "    atomicAdd(&work[ix], 1);\n  }\n}\n";
  // One block of 32 warps, each over a contiguous stretch of rows read 32 at a time (coalesced):
  // the stretches' totals, their scan in shared memory, then each stretch scanned by warp
  // shuffles, 4 loads in flight per lane. (One thread a stretch read 49 scattered ints in turn:
  // the GPT's 50304 rows.)
  src << "extern \"C\" __global__ void __launch_bounds__(1024) tr_kernel_3(" << params << ") {\n"
      << "  __shared__ long long part[32];\n"
      << "  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;\n"
      << "  const long long per = ((TR_ROWS + 31) / 32 + 127) / 128 * 128;\n"
      << "  const long long lo = warp * per < TR_ROWS ? warp * per : TR_ROWS, hi = lo + per < TR_ROWS ? lo + per : TR_ROWS;\n"
      << "  long long t = 0;\n"
      << "  for (long long r = lo + lane; r < hi; r += 32) t += work[r];\n"
      << "  for (int d = 16; d; d >>= 1) t += __shfl_xor_sync(0xffffffffu, t, d);\n"
      << "  if (lane == 0) part[warp] = t;\n  __syncthreads();\n"
      << "  if (threadIdx.x == 0) {\n"
      << "    long long sum = 0;\n"
      << "    for (int w = 0; w < 32; ++w) { const long long v = part[w]; part[w] = sum; sum += v; }\n"
      << "    work[2 * TR_ROWS] = (int)sum;\n  }\n  __syncthreads();\n"
      << "  long long at = part[warp];\n"
      << "  for (long long r0 = lo; r0 < hi; r0 += 128) {\n"
      << "    int v[4];\n"
      << "#pragma unroll\n"
      << "    for (int u = 0; u < 4; ++u) { const long long r = r0 + u * 32 + lane; v[u] = r < hi ? work[r] : 0; }\n"
      << "#pragma unroll\n"
      << "    for (int u = 0; u < 4; ++u) {\n"
      << "      int x = v[u];\n"
      << "      for (int d = 1; d < 32; d <<= 1) { const int y = __shfl_up_sync(0xffffffffu, x, d); if (lane >= d) x += y; }\n"
      << "      const long long r = r0 + u * 32 + lane;\n"
      << "      if (r < hi) work[TR_ROWS + r] = (int)(at + x - v[u]);\n"
      << "      at += __shfl_sync(0xffffffffu, x, 31);\n"
      << "    }\n  }\n}\n";
  src << "extern \"C\" __global__ void __launch_bounds__(256) tr_kernel_4(" << params << ") {\n"
      << "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < TR_N; i += (long long)gridDim.x * blockDim.x) {\n"
      << "    const long long ix = (long long)index[i];\n    if (ix < 0 || ix >= TR_ROWS) continue;\n"
      << "    const int at = work[TR_ROWS + ix] + atomicAdd(&work[2 * TR_ROWS + 1 + ix], 1);\n"
      << "    work[3 * TR_ROWS + 1 + at] = (int)i;\n  }\n}\n";
  std::string add = rt::is_float(g.dtype) ? "acc + " + load_expr(g.dtype, "grad[(long long)p * TR_C + c]")
                                           : "(long long)((unsigned long long)acc + (unsigned long long)" +
                                                 load_expr(g.dtype, "grad[(long long)p * TR_C + c]") + ")";
  // A row no index names (most of an embedding table's, for one batch) is zeros: written 16 bytes
  // a thread where the row's bytes allow, with no barrier (n is the block's own, so every thread
  // takes the same branch). Before, every row paid two barriers and 2-byte stores, and the GPT's
  // [50304, 768] gradient from 8192 tokens took 0.14 ms (640 GB/s) on the H200.
  // Into an addend (accumulate): y[r] + the row's sum, rounded to the output type first, as the
  // CPU's take_backward and then add compute it (the two statements' numbers, bit for bit).
  std::string put = "y[r * TR_C + c] = " + store_expr(out.dtype, "acc");
  if (accumulate) {
    const std::string mt = math_name(out.dtype), yv = load_expr(out.dtype, "y[r * TR_C + c]"), sv = load_expr(out.dtype, "sum_");
    const std::string total = rt::is_float(out.dtype)
                                  ? "(" + mt + ")(" + yv + ") + (" + mt + ")(" + sv + ")"
                                  : "(long long)((unsigned long long)" + yv + " + (unsigned long long)" + sv + ")";
    put = "{ const " + ot + " sum_ = " + store_expr(out.dtype, "acc") + "; y[r * TR_C + c] = " + store_expr(out.dtype, total) + "; }";
  }
  const long long row_bytes = cols * static_cast<long long>(rt::dtype_size(out.dtype));
  const bool vec_zero = row_bytes % 16 == 0;
  // A segment longer than TR_SORTED (a padding token's row, convolution's zero slot: tens of
  // thousands of positions) is put in position order by the block: a stable LSD radix sort, 4
  // bits a pass over the bits positions below TR_N need, each thread counting then placing one
  // contiguous chunk (per-thread digit counts in shared memory, scanned digit-major), between the
  // list and a scratch area of the same size. Before, each column's thread scanned all TR_N
  // indices for the row's (1.8M a column: 107 ms of a ResNet block's backward on the H100).
  int key_bits = 1;
  while (key_bits < 31 && (1LL << key_bits) < n_idx) ++key_bits;
  src << "#define TR_KEY_PASSES " << (key_bits + 3) / 4 << "\n"
      << "__device__ const int* tr_sort_segment(int* a, int* b, int n, int* hist, int* scan) {\n"
      << "  const int t = threadIdx.x, chunk = (n + 255) / 256;\n"
      << "  const int lo = t * chunk < n ? t * chunk : n, hi = lo + chunk < n ? lo + chunk : n;\n"
      << "  for (int pass = 0; pass < TR_KEY_PASSES; ++pass) {\n"
      << "    const int shift = 4 * pass;\n"
      << "    for (int d = 0; d < 16; ++d) hist[d * 256 + t] = 0;\n"
      << "    for (int j = lo; j < hi; ++j) ++hist[((a[j] >> shift) & 15) * 256 + t];\n"
      << "    __syncthreads();\n"
      << "    int mine = 0;\n"
      << "    for (int q = 0; q < 16; ++q) mine += hist[t * 16 + q];\n"
      << "    scan[t] = mine;\n    __syncthreads();\n"
      << "    for (int d = 1; d < 256; d <<= 1) {\n"
      << "      const int v = t >= d ? scan[t - d] : 0;\n      __syncthreads();\n"
      << "      scan[t] += v;\n      __syncthreads();\n    }\n"
      << "    int at = scan[t] - mine;\n"
      << "    for (int q = 0; q < 16; ++q) { const int v = hist[t * 16 + q]; hist[t * 16 + q] = at; at += v; }\n"
      << "    __syncthreads();\n"
      << "    for (int j = lo; j < hi; ++j) { const int v = a[j]; b[hist[((v >> shift) & 15) * 256 + t]++] = v; }\n"
      << "    __syncthreads();\n"
      << "    int* x = a; a = b; b = x;\n  }\n"
      << "  return a;\n}\n";
  src << "extern \"C\" __global__ void __launch_bounds__(256) tr_kernel_5(" << params << ") {\n"
      << "  __shared__ int seg[TR_SORTED], sorted[TR_SORTED], hist[16 * 256], scan[256];\n"
      << "  for (long long r = blockIdx.x; r < TR_ROWS; r += gridDim.x) {\n"
      << "    const int start = work[TR_ROWS + r], n = work[r];\n"
      << "    const int* list = work + 3 * TR_ROWS + 1 + start;\n";
  if (accumulate)
    src << "    if (n == 0) continue;  // the row keeps its value\n";
  else if (vec_zero)
    src << "    if (n == 0) {\n"
        << "      uint4* row = (uint4*)(y + r * TR_C);\n"
        << "      for (long long c = threadIdx.x; c < " << row_bytes / 16 << "LL; c += blockDim.x) row[c] = make_uint4(0, 0, 0, 0);\n"
        << "      continue;\n    }\n";
  src << "    if (n <= TR_SORTED) {\n"
      << "      for (int j = threadIdx.x; j < n; j += blockDim.x) seg[j] = list[j];\n      __syncthreads();\n"
      << "      for (int j = threadIdx.x; j < n; j += blockDim.x) {\n"
      << "        const int v = seg[j];\n        int rank = 0;\n"
      << "        for (int q = 0; q < n; ++q) rank += seg[q] < v;\n        sorted[rank] = v;\n      }\n      __syncthreads();\n"
      << "      for (long long c = threadIdx.x; c < TR_C; c += blockDim.x) {\n"
      << "        " << acc_t << " acc = 0;\n"
      << "        for (int j = 0; j < n; ++j) { const int p = sorted[j]; acc = " << add << "; }\n"
      << "        " << put << ";\n      }\n"
      << "    } else {  // a long segment: sorted in place by a stable radix sort, then summed in order\n"
      << "      const int* in = tr_sort_segment((int*)list, work + 3 * TR_ROWS + 1 + TR_N + start, n, hist, scan);\n"
      << "      for (long long c = threadIdx.x; c < TR_C; c += blockDim.x) {\n"
      << "        " << acc_t << " acc = 0;\n"
      << "        for (int j = 0; j < n; ++j) { const int p = in[j]; acc = " << add << "; }\n"
      << "        " << put << ";\n      }\n"
      << "    }\n    __syncthreads();  // seg, sorted and hist are reused\n  }\n}\n";
  std::string text = src.str();
  k->symbol = name_by_hash(text);
  k->source = std::move(text);
  k->threads = rows;
  k->threads2 = n_idx;
  k->partials = 3 * rows + 1 + 2 * n_idx;  // ints of the work buffer (the last n_idx: the long segments' sort)
  k->inputs = 2;
  k->checks_index = true;
  k->stages = 5;
  return true;
}

}  // namespace tracer::codegen
