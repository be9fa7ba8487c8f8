// Reduction and broadcast kernels; see cuda_reduce.h.
#include "codegen/cuda_reduce.h"

#include <algorithm>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <sstream>

#include "codegen/cuda_codegen.h"
#include "codegen/cuda_prelude.h"
#include "ir/op.h"
#include "ir/op_rules.h"
#include "runtime/kernels.h"

namespace tracer::codegen {
namespace {
using ir::Arg;
using rt::DType;


// Load to the accumulator type (double for floats, long long for integers and bools).
std::string load(DType d, const std::string& ref) {
  switch (d) {
    case DType::bf16: return "(double)tr_from_bf16(" + ref + ")";
    case DType::f16: return "(double)tr_from_f16(" + ref + ")";
    case DType::f32:
    case DType::f64: return "(double)" + ref;
    case DType::b8: return "(long long)(" + ref + " != 0)";
    default: return "(long long)" + ref;
  }
}

std::string store(DType d, const std::string& acc, bool acc_float) {
  switch (d) {
    case DType::bf16: return "tr_to_bf16((float)" + acc + ")";
    case DType::f16: return "tr_to_f16((float)" + acc + ")";
    case DType::f32: return "(float)" + acc;
    case DType::f64: return "(double)" + acc;
    case DType::b8: return "(tr_b8)(" + acc + " != 0)";
    default: return acc_float ? std::string("(") + storage_name(d) + ")tr_f2i(" + acc + ")" : std::string("(") + storage_name(d) + ")(" + acc + ")";
  }
}
}  // namespace

namespace {
// init and step of a reduction in its accumulator type (double for floats, long long else).
void reduction_ops(const std::string& op, bool fl, std::string* init, std::string* step) {
  if (op == "sum") *init = "0", *step = fl ? "acc + v" : "(long long)((unsigned long long)acc + (unsigned long long)v)";
  if (op == "prod") *init = "1", *step = fl ? "acc * v" : "(long long)((unsigned long long)acc * (unsigned long long)v)";
  if (op == "amax") *init = fl ? "-__longlong_as_double(0x7ff0000000000000LL)" : "(-9223372036854775807LL - 1)",
                 *step = fl ? "(acc != acc || acc >= v) ? acc : v" : "(acc >= v ? acc : v)";
  if (op == "amin") *init = fl ? "__longlong_as_double(0x7ff0000000000000LL)" : "9223372036854775807LL",
                 *step = fl ? "(acc != acc || acc <= v) ? acc : v" : "(acc <= v ? acc : v)";
}

// The element offset of coordinate number `var` of the dimensions `ds` of a tensor with strides
// `st` (the last of ds varies fastest).
std::string strided(const std::string& var, const std::vector<int64_t>& ds, const rt::Shape& shape, const std::vector<long long>& st) {
  std::string e;
  long long inner = 1;
  for (size_t j = ds.size(); j-- > 0;) {
    size_t d = static_cast<size_t>(ds[j]);
    if (shape[d] != 1) {
      std::string c = inner == 1 ? var : "(" + var + " / " + std::to_string(inner) + "LL)";
      if (j > 0) c = "(" + c + " % " + std::to_string(shape[d]) + "LL)";
      e += (e.empty() ? "" : " + ") + c + " * " + std::to_string(st[d]) + "LL";
    }
    inner *= shape[d];
  }
  return e.empty() ? "0LL" : e;
}
}  // namespace

// Reductions over dimensions that are not contiguous (sum over (0, 2) of [N, C, HW]): one
// thread per output, looping over the reduced elements in order through their strides.
bool generate_strided_reduction(const ir::Stmt& s, const std::vector<int64_t>& dims, SimpleKernel* k, std::string* why) {
  const std::string& op = s.op->name;
  const ir::TensorType& in = s.args[0].proxy->type;
  const ir::TensorType& out = s.outputs[0]->type;
  std::vector<int64_t> kept;
  for (int64_t d = 0; d < static_cast<int64_t>(in.shape.size()); ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) kept.push_back(d);
  long long n_out = 1, R = 1;
  for (int64_t d : kept) n_out *= in.shape[static_cast<size_t>(d)];
  for (int64_t d : dims) R *= in.shape[static_cast<size_t>(d)];
  if (n_out == 0) {
    *why = "the output is empty";
    return false;
  }
  if (R == 0 && (op == "amax" || op == "amin")) {
    *why = "an empty max or min (the CPU reports the error)";
    return false;
  }
  std::vector<long long> st(in.shape.size(), 1);
  for (size_t d = in.shape.size(); d-- > 1;) st[d - 1] = st[d] * in.shape[d];
  bool fl = rt::is_float(in.dtype);
  std::string acc_t = fl ? "double" : "long long", init, step;
  reduction_ops(op, fl, &init, &step);
  std::ostringstream src;
  src << cuda_prelude() << "\n// prims." << op << " of " << storage_name(in.dtype) << rt::shape_str(in.shape) << " over dimensions";
  for (int64_t d : dims) src << " " << d;
  src << " (not contiguous): one thread per output\n";
  src << "__device__ __forceinline__ " << acc_t << " tr_step(" << acc_t << " acc, " << acc_t << " v) { return " << step << "; }\n";
  src << "extern \"C\" __global__ void __launch_bounds__(256) tr_kernel(const " << storage_name(in.dtype) << "* __restrict__ x, "
      << storage_name(out.dtype) << "* __restrict__ y) {\n";
  src << "  for (long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x; o < " << n_out
      << "LL; o += (long long)gridDim.x * blockDim.x) {\n";
  src << "    const long long base = " << strided("o", kept, in.shape, st) << ";\n";
  src << "    " << acc_t << " acc = " << init << ";\n";
  src << "    for (long long r = 0; r < " << R << "LL; ++r) acc = tr_step(acc, "
      << load(in.dtype, "x[base + " + strided("r", dims, in.shape, st) + "]") << ");\n";
  src << "    y[o] = " << store(out.dtype, "acc", fl) << ";\n  }\n}\n";
  std::string text = src.str();
  k->symbol = name_by_hash(text);
  k->source = std::move(text);
  k->threads = n_out;
  return true;
}

bool generate_reduction(const ir::Stmt& s, SimpleKernel* k, std::string* why, int sm_count) {
  if (s.kind != ir::StmtKind::Prim || !s.op || s.args.empty() || s.args[0].kind != Arg::Kind::Proxy) {
    *why = "not a primitive reduction over a tensor";
    return false;
  }
  const std::string& op = s.op->name;
  if (op != "sum" && op != "prod" && op != "amax" && op != "amin") {
    *why = "prims." + op + " is not a reduction";
    return false;
  }
  const ir::TensorType& in = s.args[0].proxy->type;
  const ir::TensorType& out = s.outputs[0]->type;
  std::vector<int64_t> dims;
  try {
    dims = ir::reduce_dims(s.args[0], s.args[1]);  // normalised, sorted, checked as on the CPU
  } catch (const std::exception& e) {
    *why = e.what();
    return false;
  }
  if (dims.empty()) {
    *why = "no dimensions to reduce";
    return false;
  }
  bool contiguous = true;
  for (size_t j = 1; j < dims.size(); ++j) contiguous = contiguous && dims[j] == dims[j - 1] + 1;
  if (!contiguous) return generate_strided_reduction(s, dims, k, why);
  long long A = 1, R = 1, B = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(in.shape.size()); ++d)
    (d < dims.front() ? A : d > dims.back() ? B : R) *= in.shape[static_cast<size_t>(d)];
  if (A * B == 0) {
    *why = "the output is empty";
    return false;
  }
  if (R == 0 && (op == "amax" || op == "amin")) {
    *why = "an empty max or min (the CPU reports the error)";
    return false;
  }
  // The accumulator follows the input, as on the CPU: double for floats, 64-bit integers else.
  bool fl = rt::is_float(in.dtype);
  std::string acc_t = fl ? "double" : "long long";
  std::string init, step;
  reduction_ops(op, fl, &init, &step);
  // Split R into S chunks when the outputs alone would leave the device mostly idle: S partial
  // results per output, then a second kernel combines them (in chunk order: deterministic).
  long long S = 1;
  if (B == 1) {
    long long want_blocks = 4LL * sm_count;
    if (A < want_blocks) S = std::min((want_blocks + A - 1) / A, (R + 2047) / 2048);
  } else {
    long long want_threads = 2048LL * sm_count;
    if (A * B < want_threads) S = std::min((want_threads + A * B - 1) / (A * B), (R + 63) / 64);
  }
  S = std::max(1LL, S);
  long long C = (R + S - 1) / S;  // elements of R per chunk
  std::ostringstream src;
  src << cuda_prelude() << "\n";
  src << "// prims." << op << " of " << storage_name(in.dtype) << "[" << A << ", " << R << ", " << B << "] over the middle dimension, "
      << S << " chunk(s) of " << C << "\n";
  src << "__device__ __forceinline__ " << acc_t << " tr_step(" << acc_t << " acc, " << acc_t << " v) { return " << step << "; }\n";
  std::string dst_t = S > 1 ? acc_t : storage_name(out.dtype);
  auto put = [&](const std::string& v) { return S > 1 ? v : store(out.dtype, v, fl); };
  src << "extern \"C\" __global__ void __launch_bounds__(256) tr_kernel(const " << storage_name(in.dtype) << "* __restrict__ x, "
      << dst_t << "* __restrict__ y) {\n";
  src << "  const long long A = " << A << "LL, R = " << R << "LL, B = " << B << "LL, S = " << S << "LL, C = " << C << "LL;\n";
  if (B == 1) {
    // One block per (output row, chunk): threads stride over the chunk, then a tree in shared memory.
    src << "  __shared__ " << acc_t << " part[256];\n";
    src << "  for (long long u = blockIdx.x; u < A * S; u += gridDim.x) {\n";
    src << "    const long long a = u / S, r0 = (u % S) * C, r1 = r0 + C < R ? r0 + C : R;\n";
    src << "    " << acc_t << " acc = " << init << ";\n";
    src << "    for (long long r = r0 + threadIdx.x; r < r1; r += blockDim.x) acc = tr_step(acc, " << load(in.dtype, "x[a * R + r]") << ");\n";
    src << "    part[threadIdx.x] = acc;\n    __syncthreads();\n";
    src << "    for (int w = blockDim.x / 2; w > 0; w >>= 1) {\n";
    src << "      if (threadIdx.x < w) part[threadIdx.x] = tr_step(part[threadIdx.x], part[threadIdx.x + w]);\n";
    src << "      __syncthreads();\n    }\n";
    src << "    if (threadIdx.x == 0) y[u] = " << put("part[0]") << ";\n";
    src << "    __syncthreads();\n  }\n}\n";
    k->threads = std::min<long long>(A * S, 65535) * 256;
  } else {
    // One thread per (output row, chunk, column): neighbouring threads read neighbouring columns.
    src << "  for (long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x; o < A * S * B; o += (long long)gridDim.x * blockDim.x) {\n";
    src << "    const long long b = o % B, u = o / B, a = u / S, r0 = (u % S) * C, r1 = r0 + C < R ? r0 + C : R;\n";
    src << "    " << acc_t << " acc = " << init << ";\n";
    src << "    for (long long r = r0; r < r1; ++r) acc = tr_step(acc, " << load(in.dtype, "x[(a * R + r) * B + b]") << ");\n";
    src << "    y[o] = " << put("acc") << ";\n  }\n}\n";
    k->threads = A * S * B;
  }
  if (S > 1) {
    // Stage 2: out[a, b] = the S partials of (a, b) combined in order.
    src << "extern \"C\" __global__ void __launch_bounds__(256) tr_kernel_2(const " << acc_t << "* __restrict__ p, "
        << storage_name(out.dtype) << "* __restrict__ y) {\n";
    src << "  const long long A = " << A << "LL, B = " << B << "LL, S = " << S << "LL;\n";
    src << "  for (long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x; o < A * B; o += (long long)gridDim.x * blockDim.x) {\n";
    src << "    const long long a = o / B, b = o % B;\n";
    src << "    " << acc_t << " acc = " << init << ";\n";
    src << "    for (long long s = 0; s < S; ++s) acc = tr_step(acc, p[(a * S + s) * B + b]);\n";
    src << "    y[o] = " << store(out.dtype, "acc", fl) << ";\n  }\n}\n";
    k->threads2 = A * B;
    k->partials = A * S * B;
  }
  std::string text = src.str();
  k->symbol = name_by_hash(text);
  if (S > 1) k->symbol2 = k->symbol + "_2";
  k->source = std::move(text);
  return true;
}

bool generate_simple(const ir::Stmt& s, SimpleKernel* k, std::string* why, int sm_count) {
  if (s.kind == ir::StmtKind::Prim && s.op) {
    const std::string& op = s.op->name;
    if (op == "broadcast_in_dim") return generate_broadcast(s, k, why);
    if (op == "transpose" || op == "slice" || op == "cat") return generate_layout(s, k, why);
    if (op == "full" || op == "iota") return generate_creation(s, k, why);
    if (op == "take") return generate_take(s, k, why);
    if (op == "take_backward") return generate_take_backward(s, k, why);
    if (op == "sort") return generate_sort(s, k, why);
  }
  return generate_reduction(s, k, why, sm_count);
}

namespace {
// The flat output index i as coordinates of `shape`, each times its factor, summed: the element
// offset of a strided read. Unit dimensions and zero factors are left out. `I` is the index type.
std::string strided_offset(const rt::Shape& shape, const std::vector<long long>& factor, long long base) {
  std::string idx = base ? std::to_string(base) + "LL" : "";
  long long inner = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] != 1 && factor[d] != 0) {
      std::string c = inner == 1 ? "i" : "(i / (I)" + std::to_string(inner) + ")";
      if (d > 0) c = "(" + c + " % (I)" + std::to_string(shape[d]) + ")";
      idx += (idx.empty() ? "" : " + ") + std::string("(long long)") + c + " * " + std::to_string(factor[d]) + "LL";
    }
    inner *= shape[d];
  }
  return idx.empty() ? "0" : idx;
}

std::vector<long long> contiguous_strides(const rt::Shape& sh) {
  std::vector<long long> st(sh.size(), 1);
  for (size_t d = sh.size(); d-- > 1;) st[d - 1] = st[d] * sh[d];
  return st;
}

// Index type: 32-bit when every index fits (division by constants is much cheaper).
const char* index_type(long long n) { return n < (1LL << 31) ? "unsigned int" : "long long"; }

void finish(SimpleKernel* k, std::ostringstream& src, long long n) {
  std::string text = src.str();
  k->symbol = name_by_hash(text);
  k->source = std::move(text);
  k->threads = n;
}
}  // namespace

bool generate_layout(const ir::Stmt& s, SimpleKernel* k, std::string* why) {
  const std::string& op = s.op->name;
  const ir::TensorType& out = s.outputs[0]->type;
  long long n = rt::numel(out.shape);
  if (n == 0) {
    *why = "the output is empty";
    return false;
  }
  std::vector<const ir::TensorType*> ins;
  std::vector<std::string> reads;  // one expression per input
  std::ostringstream body;
  if (op == "transpose" || op == "slice") {
    if (s.args[0].kind != Arg::Kind::Proxy) {
      *why = "not a tensor";
      return false;
    }
    const ir::TensorType& in = s.args[0].proxy->type;
    std::vector<long long> ist = contiguous_strides(in.shape), factor(out.shape.size(), 0);
    long long base = 0;
    try {
      if (op == "transpose") {
        std::vector<int64_t> perm = ir::normalized_perm(s.args[0], s.args[1]);
        for (size_t d = 0; d < perm.size(); ++d) factor[d] = ist[static_cast<size_t>(perm[d])];
      } else {
        ir::SliceSpec sp = ir::slice_spec(s.args[0], s.args[1], s.args[2], s.args.size() > 3 ? s.args[3] : Arg());
        for (size_t d = 0; d < sp.start.size(); ++d) {
          base += sp.start[d] * ist[d];
          factor[d] = sp.step[d] * ist[d];
        }
      }
    } catch (const std::exception& e) {
      *why = e.what();
      return false;
    }
    ins.push_back(&in);
    body << "    y[i] = x0[" << strided_offset(out.shape, factor, base) << "];\n";
  } else {  // cat
    if (!s.args[0].is_seq() || s.args[0].items.empty()) {
      *why = "not a list of tensors";
      return false;
    }
    int64_t dim = 0;
    try {
      dim = ir::normalize_dim(s.args.size() > 1 && s.args[1].kind == Arg::Kind::Int ? s.args[1].i : 0,
                              static_cast<int64_t>(out.shape.size()), "dim");
    } catch (const std::exception& e) {
      *why = e.what();
      return false;
    }
    long long inner = 1;
    for (size_t d = static_cast<size_t>(dim) + 1; d < out.shape.size(); ++d) inner *= out.shape[d];
    long long along = out.shape[static_cast<size_t>(dim)];
    // Output viewed as [outer, along, inner]; input j covers [start_j, start_j + len_j) of `along`.
    body << "    const I c = (i / (I)" << inner << ") % (I)" << along << ", o = i / (I)" << inner * along << ", r = i % (I)" << inner << ";\n";
    long long start = 0;
    size_t j = 0;
    for (const Arg& a : s.args[0].items) {
      if (a.kind != Arg::Kind::Proxy || a.proxy->type.dtype != out.dtype) {
        *why = "cat of tensors of another dtype";
        return false;
      }
      long long len = a.proxy->type.shape[static_cast<size_t>(dim)];
      if (len == 0) continue;
      ins.push_back(&a.proxy->type);
      body << "    " << (j ? "else if" : "if") << " (c < (I)" << start + len << ") y[i] = x" << j << "[((long long)o * " << len
           << "LL + (long long)(c - (I)" << start << ")) * " << inner << "LL + r];\n";
      start += len;
      ++j;
    }
    if (ins.empty()) {
      *why = "nothing to concatenate";
      return false;
    }
  }
  std::ostringstream src;
  src << cuda_prelude() << "\n// prims." << op << " to " << storage_name(out.dtype) << rt::shape_str(out.shape) << "\n";
  src << "typedef " << index_type(std::max(n, 1LL) + (1LL << 24)) << " I;\n";
  src << "extern \"C\" __global__ void __launch_bounds__(256) tr_kernel(";
  for (size_t j = 0; j < ins.size(); ++j) src << "const " << storage_name(ins[j]->dtype) << "* __restrict__ x" << j << ", ";
  src << storage_name(out.dtype) << "* __restrict__ y) {\n";
  src << "  for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < (I)" << n << "LL; i += (I)gridDim.x * blockDim.x) {\n";
  src << body.str() << "  }\n}\n";
  finish(k, src, n);
  k->inputs = ins.size();
  return true;
}

bool generate_creation(const ir::Stmt& s, SimpleKernel* k, std::string* why) {
  const std::string& op = s.op->name;
  const ir::TensorType& out = s.outputs[0]->type;
  long long n = rt::numel(out.shape);
  if (n == 0) {
    *why = "the output is empty";
    return false;
  }
  std::string value;
  if (op == "full") {
    rt::Scalar v;
    try {
      v = ir::to_scalar(s.args[1]);
    } catch (const std::exception& e) {
      *why = e.what();
      return false;
    }
    return generate_fill(out, v, k, why);
  } else {  // iota: start + i * step, converted as the CPU's convert<T> does (exact for these dtypes)
    long long start = s.args[1].kind == Arg::Kind::Int ? s.args[1].i : 0, step = s.args[2].kind == Arg::Kind::Int ? s.args[2].i : 1;
    std::string v = "(long long)((unsigned long long)" + std::to_string(start) + "LL + (unsigned long long)i * (unsigned long long)" +
                    std::to_string(step) + "LL)";
    if (out.dtype == DType::bf16 || out.dtype == DType::f16)  // to float, then rounded: the CPU's convert<T>
      value = std::string(out.dtype == DType::bf16 ? "tr_to_bf16" : "tr_to_f16") + "((float)" + v + ")";
    else
      value = out.dtype == DType::b8 ? "(tr_b8)(" + v + " != 0)" : std::string("(") + storage_name(out.dtype) + ")" + v;
  }
  std::ostringstream src;
  src << cuda_prelude() << "\n// prims." << op << " to " << storage_name(out.dtype) << rt::shape_str(out.shape) << "\n";
  src << "extern \"C\" __global__ void __launch_bounds__(256) tr_kernel(" << storage_name(out.dtype) << "* __restrict__ y) {\n";
  src << "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < " << n
      << "LL; i += (long long)gridDim.x * blockDim.x) y[i] = " << value << ";\n}\n";
  finish(k, src, n);
  k->inputs = 0;
  return true;
}

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

bool generate_fill(const ir::TensorType& out, const rt::Scalar& v, SimpleKernel* k, std::string* why) {
  long long n = rt::numel(out.shape);
  // The one value, converted on the host exactly as the CPU converts it; the kernel stores its bits.
  rt::Tensor one;
  try {
    one = rt::full({}, v, out.dtype, nullptr);
  } catch (const std::exception& e) {
    *why = e.what();
    return false;
  }
  unsigned long long bits = 0;
  std::memcpy(&bits, one.data(), rt::dtype_size(out.dtype));
  std::ostringstream src;
  src << cuda_prelude() << "\n// prims.full to " << storage_name(out.dtype) << rt::shape_str(out.shape) << "\n";
  src << "extern \"C\" __global__ void __launch_bounds__(256) tr_kernel(" << storage_name(out.dtype) << "* __restrict__ y) {\n";
  src << "  const unsigned long long bits = " << bits << "ULL;\n  " << storage_name(out.dtype) << " v;\n  memcpy(&v, &bits, sizeof v);\n";
  src << "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < " << n
      << "LL; i += (long long)gridDim.x * blockDim.x) y[i] = v;\n}\n";
  finish(k, src, n);
  k->inputs = 0;
  return true;
}

std::string rng_state_source(std::string* symbol) {
  std::ostringstream src;
  src << "// prims.rng_state on the device: seed and offset from the run's base (seed, offset at the\n"
         "// start of the run), the offset advanced by the draws before this statement.\n"
         "extern \"C\" __global__ void tr_kernel(const long long* __restrict__ base, long long delta, long long* seed, "
         "long long* offset) {\n"
         "  if (blockIdx.x == 0 && threadIdx.x == 0) {\n"
         "    *seed = base[0];\n"
         "    *offset = (long long)((unsigned long long)base[1] + (unsigned long long)delta);\n"
         "  }\n}\n";
  std::string text = src.str();
  *symbol = name_by_hash(text);
  return text;
}

std::string uniform_source(const ir::TensorType& out, double low, double high, std::string* symbol) {
  const bool f64 = out.dtype == DType::f64;
  const long long n = rt::numel(out.shape);
  char lo[64], hi[64];
  std::snprintf(lo, sizeof lo, "%.17g", low);
  std::snprintf(hi, sizeof hi, "%.17g", high);
  std::string m = f64 ? "double" : "float", cast = f64 ? "(double)" : "(float)";
  std::string word = f64 ? "tr_uniform_word_f64" : "tr_uniform_word_f32";
  std::string value = word + "(w[q], " + cast + lo + ", " + cast + hi + ")";
  switch (out.dtype) {
    case DType::bf16: value = "tr_to_bf16(" + value + ")"; break;
    case DType::f16: value = "tr_to_f16(" + value + ")"; break;
    default: break;
  }
  std::ostringstream src;
  src << cuda_prelude() << "\n// prims.uniform (the stateful generator) to " << storage_name(out.dtype) << rt::shape_str(out.shape)
      << ": Philox under (seed, offset) = (base[0], base[1] + delta), the run's generator state advanced by the draws\n"
         "// before this one; element e is word e % 4 of block e / 4, as on the CPU.\n"
         "extern \"C\" __global__ void __launch_bounds__(256) tr_kernel(const long long* __restrict__ base, long long delta, "
      << storage_name(out.dtype) << "* __restrict__ y) {\n"
      << "  const unsigned long long seed = (unsigned long long)base[0], offset = (unsigned long long)base[1] + (unsigned long long)delta;\n"
      << "  for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j * 4 < " << n
      << "LL; j += (long long)gridDim.x * blockDim.x) {\n"
      << "    const uint4 r = tr_philox4((unsigned long long)j, seed, offset);\n"
      << "    const unsigned int w[4] = {r.x, r.y, r.z, r.w};\n"
      << "#pragma unroll\n"
      << "    for (int q = 0; q < 4; ++q)\n"
      << "      if (j * 4 + q < " << n << "LL) y[j * 4 + q] = " << value << ";\n"
      << "  }\n}\n";
  (void)m;
  std::string text = src.str();
  *symbol = name_by_hash(text);
  return text;
}

bool generate_broadcast(const ir::Stmt& s, SimpleKernel* k, std::string* why) {
  if (s.kind != ir::StmtKind::Prim || !s.op || s.op->name != "broadcast_in_dim" || s.args[0].kind != Arg::Kind::Proxy) {
    *why = "not a broadcast_in_dim of a tensor";
    return false;
  }
  const ir::TensorType& in = s.args[0].proxy->type;
  const ir::TensorType& out = s.outputs[0]->type;
  std::vector<int64_t> bdims;
  for (const Arg& d : s.args[2].items) bdims.push_back(d.i);
  size_t r = out.shape.size(), k_in = in.shape.size();
  if (bdims.size() != k_in) {
    *why = "broadcast dimensions do not match the input's rank";
    return false;
  }
  std::vector<long long> ostride(r, 1), istride(k_in, 1);
  for (size_t d = r; d-- > 1;) ostride[d - 1] = ostride[d] * out.shape[d];
  for (size_t d = k_in; d-- > 1;) istride[d - 1] = istride[d] * in.shape[d];
  std::string idx;
  for (size_t j = 0; j < k_in; ++j) {
    if (in.shape[j] == 1) continue;
    size_t d = static_cast<size_t>(bdims[j]);
    std::string c = "(i / " + std::to_string(ostride[d]) + "LL % " + std::to_string(out.shape[d]) + "LL)";
    idx += (idx.empty() ? "" : " + ") + c + " * " + std::to_string(istride[j]) + "LL";
  }
  if (idx.empty()) idx = "0";
  long long n = rt::numel(out.shape);
  std::ostringstream src;
  src << cuda_prelude() << "\n// prims.broadcast_in_dim to " << n << " elements\n";
  src << "extern \"C\" __global__ void __launch_bounds__(256) tr_kernel(const " << storage_name(in.dtype) << "* __restrict__ x, "
      << storage_name(out.dtype) << "* __restrict__ y) {\n";
  src << "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < " << n
      << "LL; i += (long long)gridDim.x * blockDim.x) y[i] = x[" << idx << "];\n}\n";
  std::string text = src.str();
  k->symbol = name_by_hash(text);
  k->source = std::move(text);
  k->threads = n;
  return true;
}

}  // namespace tracer::codegen
