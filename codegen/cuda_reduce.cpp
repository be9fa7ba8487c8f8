// Reduction and broadcast kernels; see cuda_reduce.h.
#include "codegen/cuda_reduce.h"
#include "codegen/cuda_reduce_detail.h"

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

namespace reduce_detail {
// Load to the accumulator type (double for floats, long long for integers and bools).
std::string load(rt::DType d, const std::string& ref) {
  switch (d) {
    case rt::DType::bf16: return "(double)tr_from_bf16(" + ref + ")";
    case rt::DType::f16: return "(double)tr_from_f16(" + ref + ")";
    case rt::DType::f32:
    case rt::DType::f64: return "(double)" + ref;
    case rt::DType::b8: return "(long long)(" + ref + " != 0)";
    default: return "(long long)" + ref;
  }
}

// A kernel made of src over n threads, named by its text.
void finish(SimpleKernel* k, std::ostringstream& src, long long n) {
  std::string text = src.str();
  k->symbol = name_by_hash(text);
  k->source = std::move(text);
  k->threads = n;
}
}  // namespace reduce_detail
using reduce_detail::finish;
using reduce_detail::load;

namespace {
using ir::Arg;
using rt::DType;

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
