// Shape and dtype rules of the primitives (PyTorch promotion, NumPy broadcasting).
#include "ir/op_rules.h"

#include <algorithm>
#include <cmath>

namespace tracer::ir {

using K = Arg::Kind;

static std::string kind_name(const Arg& a) {
  switch (a.kind) {
    case K::None: return "None";
    case K::Bool: return "bool";
    case K::Int: return "int";
    case K::Float: return "float";
    case K::Str: return "str";
    case K::DType: return "dtype";
    case K::Proxy:
    case K::Tensor: return "tensor";
    case K::Tuple: return "tuple";
    case K::List: return "list";
    case K::Dict: return "dict";
  }
  return "value";
}

TensorType tensor_type(const Arg& a, const char* what) {
  if (!a.is_tensorish()) throw OpError(std::string("argument '") + what + "' must be a tensor, got " + kind_name(a));
  return arg_type(a);
}

DType dtype_arg(const Arg& a, const char* what) {
  if (a.kind != K::DType) throw OpError(std::string("argument '") + what + "' must be a dtype, got " + kind_name(a));
  return a.dtype;
}

int64_t int_arg(const Arg& a, const char* what) {
  if (a.kind == K::Int) return a.i;
  if (a.kind == K::Bool) return a.b;
  throw OpError(std::string("argument '") + what + "' must be an int, got " + kind_name(a));
}

std::vector<int64_t> int_list(const Arg& a, const char* what) {
  if (a.kind == K::Int) return {a.i};
  if (!a.is_seq()) throw OpError(std::string("argument '") + what + "' must be a tuple of ints, got " + kind_name(a));
  std::vector<int64_t> out;
  for (const Arg& x : a.items) out.push_back(int_arg(x, what));
  return out;
}

int64_t normalize_dim(int64_t d, int64_t rank, const char* what) {
  int64_t r = std::max<int64_t>(rank, 1);
  if (d < -r || d >= r)
    throw OpError(std::string(what) + " " + std::to_string(d) + " is out of range for a tensor of rank " +
                  std::to_string(rank));
  return d < 0 ? d + r : d;
}

rt::Scalar to_scalar(const Arg& a) {
  rt::Scalar s;
  if (a.kind == K::Int || a.kind == K::Bool) {
    s.is_int = true;
    s.int_value = a.kind == K::Int ? a.i : a.b;
    s.value = static_cast<double>(s.int_value);
  } else if (a.kind == K::Float) {
    s.value = a.f;
  } else {
    throw OpError("expected a number, got " + kind_name(a));
  }
  return s;
}

rt::Operand to_operand(const Arg& a) {
  if (a.kind == K::Tensor) return a.tensor;
  return to_scalar(a);
}

static rt::ScalarKind scalar_kind(const Arg& a) {
  return a.kind == K::Float ? rt::ScalarKind::Float : a.kind == K::Int ? rt::ScalarKind::Int : rt::ScalarKind::Bool;
}

static int category(DType t) { return rt::is_float(t) ? 2 : rt::is_int(t) ? 1 : 0; }

DType promote_args(const std::vector<const Arg*>& args) {
  bool have_dim = false, have_zero = false;
  DType dim_t = DType::b8, zero_t = DType::b8;
  for (const Arg* a : args) {
    if (!a->is_tensorish()) continue;
    TensorType t = arg_type(*a);
    DType& slot = t.shape.empty() ? zero_t : dim_t;
    bool& have = t.shape.empty() ? have_zero : have_dim;
    slot = have ? rt::promote(slot, t.dtype) : t.dtype;
    have = true;
  }
  DType r;
  if (have_dim) {
    r = dim_t;
    if (have_zero && category(zero_t) > category(r)) r = zero_t;
  } else if (have_zero) {
    r = zero_t;
  } else {
    throw OpError("expected at least one tensor argument");
  }
  for (const Arg* a : args)
    if (a->is_number()) r = rt::promote_with_scalar(r, scalar_kind(*a));
  return r;
}

static TensorType broadcast_all(const std::vector<const Arg*>& args) {
  TensorType out;
  bool first = true;
  for (const Arg* a : args) {
    if (!a->is_tensorish()) {
      if (!a->is_number()) throw OpError("expected a tensor or a number, got " + kind_name(*a));
      continue;
    }
    TensorType t = arg_type(*a);
    if (first) {
      out = t;
      first = false;
      continue;
    }
    auto s = rt::broadcast_shapes(out.shape, t.shape);
    if (!s)
      throw OpError("shapes " + rt::shape_str(out.shape) + " and " + rt::shape_str(t.shape) +
                    " cannot be broadcast together");
    out.shape = *s;
  }
  return out;
}

TensorType unary_type(const Arg& a, UnaryRule r) {
  TensorType t = tensor_type(a, "a");
  switch (r) {
    case UnaryRule::Same:
      break;
    case UnaryRule::Float:
      if (!rt::is_float(t.dtype)) t.dtype = DType::f32;
      break;
    case UnaryRule::Bool:
      t.dtype = DType::b8;
      break;
    case UnaryRule::Integer:
      if (rt::is_float(t.dtype))
        throw OpError(std::string("expected an integer or bool tensor, got ") + rt::dtype_name(t.dtype));
      break;
  }
  return t;
}

BinaryTypes binary_type(const Arg& a, const Arg& b, BinaryRule r) {
  TensorType out = broadcast_all({&a, &b});
  DType p = promote_args({&a, &b});
  BinaryTypes res{out, p};
  switch (r) {
    case BinaryRule::Arith:
      res.out.dtype = p;
      break;
    case BinaryRule::TrueDiv:
      if (!rt::is_float(p)) p = DType::f32;
      res.out.dtype = p;
      res.compute = p;
      break;
    case BinaryRule::Compare:
    case BinaryRule::Logical:
      res.out.dtype = DType::b8;
      break;
    case BinaryRule::Bitwise:
      if (rt::is_float(p)) throw OpError(std::string("expected integer or bool tensors, got ") + rt::dtype_name(p));
      res.out.dtype = p;
      break;
  }
  return res;
}

TensorType where_type(const Arg& pred, const Arg& a, const Arg& b) {
  tensor_type(pred, "pred");
  TensorType out = broadcast_all({&pred, &a, &b});
  if (!a.is_tensorish() && !b.is_tensorish()) {
    // Two scalars: the default dtype of the higher kind, as torch.where does.
    bool fl = a.kind == K::Float || b.kind == K::Float, in = a.kind == K::Int || b.kind == K::Int;
    out.dtype = fl ? DType::f32 : in ? DType::i64 : DType::b8;
  } else {
    out.dtype = promote_args({&a, &b});
  }
  return out;
}

TensorType broadcast_in_dim_type(const Arg& a, const Arg& shape, const Arg& bdims) {
  TensorType t = tensor_type(a, "a");
  std::vector<int64_t> s = int_list(shape, "shape"), d = int_list(bdims, "broadcast_dimensions");
  if (d.size() != t.shape.size())
    throw OpError("broadcast_dimensions has " + std::to_string(d.size()) + " entries but the tensor has rank " +
                  std::to_string(t.shape.size()));
  for (size_t i = 0; i < d.size(); ++i) {
    if (d[i] < 0 || d[i] >= static_cast<int64_t>(s.size()) || (i > 0 && d[i] <= d[i - 1]))
      throw OpError("broadcast_dimensions must be increasing and within the output rank");
    if (t.shape[i] != 1 && t.shape[i] != s[d[i]])
      throw OpError("cannot broadcast shape " + rt::shape_str(t.shape) + " to " + rt::shape_str(s));
  }
  for (int64_t x : s)
    if (x < 0) throw OpError("negative size in shape " + rt::shape_str(s));
  t.shape = s;
  return t;
}

TensorType reshape_type(const Arg& a, const Arg& shape) {
  TensorType t = tensor_type(a, "a");
  std::vector<int64_t> s = int_list(shape, "shape");
  int64_t known = 1, infer_at = -1;
  bool overflow = false, zero = false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      if (infer_at >= 0) throw OpError("only one dimension can be -1 in shape " + rt::shape_str(s));
      infer_at = static_cast<int64_t>(i);
    } else if (s[i] < 0) {
      throw OpError("negative size in shape " + rt::shape_str(s));
    } else {
      zero = zero || s[i] == 0;
      overflow = overflow || __builtin_mul_overflow(known, s[i], &known);
    }
  }
  if (zero) known = 0;
  if (overflow && !zero) throw OpError("shape " + rt::shape_str(s) + " has more than 2^63 - 1 elements");
  int64_t n = rt::numel(t.shape);
  if (infer_at >= 0) {
    if (known == 0 || n % known != 0)
      throw OpError("cannot reshape " + rt::shape_str(t.shape) + " to " + rt::shape_str(s));
    s[infer_at] = n / known;
  }
  if (rt::numel(s) != n) throw OpError("cannot reshape " + rt::shape_str(t.shape) + " to " + rt::shape_str(s));
  t.shape = s;
  return t;
}

std::vector<int64_t> normalized_perm(const Arg& a, const Arg& perm) {
  TensorType t = tensor_type(a, "a");
  std::vector<int64_t> p = int_list(perm, "permutation");
  int64_t rank = static_cast<int64_t>(t.shape.size());
  if (static_cast<int64_t>(p.size()) != rank)
    throw OpError("permutation " + rt::shape_str(p) + " does not match rank " + std::to_string(rank));
  std::vector<bool> seen(rank, false);
  for (int64_t& d : p) {
    d = normalize_dim(d, rank, "permutation entry");
    if (seen[d]) throw OpError("permutation " + rt::shape_str(int_list(perm, "permutation")) + " repeats a dimension");
    seen[d] = true;
  }
  return p;
}

TensorType transpose_type(const Arg& a, const Arg& perm) {
  TensorType t = tensor_type(a, "a");
  std::vector<int64_t> p = normalized_perm(a, perm);
  Shape s(p.size());
  for (size_t i = 0; i < p.size(); ++i) s[i] = t.shape[p[i]];
  t.shape = s;
  return t;
}

SliceSpec slice_spec(const Arg& a, const Arg& start, const Arg& stop, const Arg& strides) {
  TensorType t = tensor_type(a, "a");
  SliceSpec s{int_list(start, "start_indices"), int_list(stop, "end_indices"), {}};
  s.step = strides.kind == K::None ? std::vector<int64_t>(t.shape.size(), 1) : int_list(strides, "strides");
  size_t r = t.shape.size();
  if (s.start.size() != r || s.stop.size() != r || s.step.size() != r)
    throw OpError("slice of a rank-" + std::to_string(r) + " tensor needs " + std::to_string(r) +
                  " start, end and stride entries");
  for (size_t i = 0; i < r; ++i) {
    if (s.step[i] <= 0) throw OpError("slice strides must be positive");
    if (s.start[i] < 0 || s.stop[i] > t.shape[i] || s.start[i] > s.stop[i])
      throw OpError("slice [" + std::to_string(s.start[i]) + ":" + std::to_string(s.stop[i]) + "] is out of bounds for dimension " +
                    std::to_string(i) + " of shape " + rt::shape_str(t.shape));
  }
  return s;
}

TensorType slice_type(const Arg& a, const Arg& start, const Arg& stop, const Arg& strides) {
  SliceSpec s = slice_spec(a, start, stop, strides);
  TensorType t = arg_type(a);
  // ceil((stop - start) / step) without overflowing for steps near 2^63.
  for (size_t i = 0; i < t.shape.size(); ++i)
    t.shape[i] = s.stop[i] > s.start[i] ? (s.stop[i] - s.start[i] - 1) / s.step[i] + 1 : 0;
  return t;
}

TensorType cat_type(const Arg& tensors, const Arg& dim) {
  if (!tensors.is_seq() || tensors.items.empty()) throw OpError("argument 'tensors' must be a non-empty list of tensors");
  TensorType out = tensor_type(tensors.items[0], "tensors");
  int64_t d = normalize_dim(int_arg(dim, "dim"), static_cast<int64_t>(out.shape.size()), "dim");
  for (size_t i = 1; i < tensors.items.size(); ++i) {
    TensorType t = tensor_type(tensors.items[i], "tensors");
    if (t.dtype != out.dtype)
      throw OpError(std::string("cannot concatenate ") + rt::dtype_name(out.dtype) + " and " + rt::dtype_name(t.dtype));
    bool ok = t.shape.size() == out.shape.size();
    for (size_t k = 0; ok && k < t.shape.size(); ++k) ok = static_cast<int64_t>(k) == d || t.shape[k] == out.shape[k];
    if (!ok)
      throw OpError("cannot concatenate shapes " + rt::shape_str(arg_type(tensors.items[0]).shape) + " and " +
                    rt::shape_str(t.shape) + " along dimension " + std::to_string(d));
    out.shape[d] += t.shape[d];
  }
  return out;
}

std::vector<int64_t> reduce_dims(const Arg& a, const Arg& dims) {
  TensorType t = tensor_type(a, "a");
  int64_t rank = static_cast<int64_t>(t.shape.size());
  std::vector<int64_t> d;
  if (dims.kind == K::None) {
    for (int64_t i = 0; i < rank; ++i) d.push_back(i);
    return d;
  }
  for (int64_t x : int_list(dims, "dims")) d.push_back(normalize_dim(x, rank, "dim"));
  std::sort(d.begin(), d.end());
  if (std::adjacent_find(d.begin(), d.end()) != d.end()) throw OpError("dims repeat a dimension");
  if (rank == 0) d.clear();
  return d;
}

TensorType reduce_type(const Arg& a, const Arg& dims, const Arg& keepdim, bool widen_ints, const Arg& dtype) {
  TensorType t = tensor_type(a, "a");
  std::vector<int64_t> d = reduce_dims(a, dims);
  bool keep = keepdim.kind == K::Bool ? keepdim.b : int_arg(keepdim, "keepdim") != 0;
  Shape s;
  for (int64_t i = 0; i < static_cast<int64_t>(t.shape.size()); ++i) {
    bool reduced = std::binary_search(d.begin(), d.end(), i);
    if (!reduced) s.push_back(t.shape[i]);
    else if (keep) s.push_back(1);
  }
  t.shape = s;
  if (dtype.kind != K::None) t.dtype = dtype_arg(dtype, "dtype");
  else if (widen_ints && !rt::is_float(t.dtype)) t.dtype = DType::i64;
  return t;
}

TensorType matmul_type(const Arg& a, const Arg& b) {
  TensorType x = tensor_type(a, "a"), y = tensor_type(b, "b");
  if (x.dtype != y.dtype)
    throw OpError(std::string("operands have different dtypes ") + rt::dtype_name(x.dtype) + " and " + rt::dtype_name(y.dtype));
  if (x.dtype == DType::b8) throw OpError("matmul of bool tensors is not supported");
  if (x.shape.empty() || y.shape.empty()) throw OpError("matmul operands must have at least one dimension");
  Shape xs = x.shape, ys = y.shape;
  bool xv = xs.size() == 1, yv = ys.size() == 1;
  if (xv) xs.insert(xs.begin(), 1);
  if (yv) ys.push_back(1);
  int64_t k1 = xs.back(), k2 = ys[ys.size() - 2];
  if (k1 != k2)
    throw OpError("shapes " + rt::shape_str(x.shape) + " and " + rt::shape_str(y.shape) + " are incompatible (" +
                  std::to_string(k1) + " != " + std::to_string(k2) + ")");
  Shape xb(xs.begin(), xs.end() - 2), yb(ys.begin(), ys.end() - 2);
  auto batch = rt::broadcast_shapes(xb, yb);
  if (!batch)
    throw OpError("batch dimensions of " + rt::shape_str(x.shape) + " and " + rt::shape_str(y.shape) + " cannot be broadcast");
  Shape out = *batch;
  if (!xv) out.push_back(xs[xs.size() - 2]);
  if (!yv) out.push_back(ys.back());
  x.shape = out;
  return x;
}

TensorType linear_type(const Arg& a, const Arg& w, const Arg& bias) {
  TensorType x = tensor_type(a, "a"), y = tensor_type(w, "w");
  if (x.dtype != y.dtype)
    throw OpError(std::string("input and weight have different dtypes ") + rt::dtype_name(x.dtype) + " and " + rt::dtype_name(y.dtype));
  if (x.shape.empty() || y.shape.size() != 2 || x.shape.back() != y.shape[1])
    throw OpError("input " + rt::shape_str(x.shape) + " and weight " + rt::shape_str(y.shape) +
                  " are incompatible (the weight is [out, in] and in must equal the input's last size)");
  if (bias.kind != K::None) {
    TensorType b = tensor_type(bias, "bias");
    if (b.dtype != x.dtype || b.shape != Shape{y.shape[0]})
      throw OpError("bias " + b.str() + " does not match weight " + y.str());
  }
  x.shape.back() = y.shape[0];
  return x;
}

static std::string device_of(const Arg& device) {
  if (device.kind == K::None) return "cpu";
  if (device.kind == K::Str) return device.s;
  throw OpError("argument 'device' must be a string, got " + kind_name(device));
}

static Shape shape_arg(const Arg& shape) {
  Shape s = int_list(shape, "shape");
  for (int64_t x : s)
    if (x < 0) throw OpError("negative size in shape " + rt::shape_str(s));
  try {
    rt::numel(s);
  } catch (const std::invalid_argument& e) {
    throw OpError(e.what());
  }
  return s;
}

// A created tensor's bytes must be countable (the allocator and the memory estimator count them).
static TensorType countable(TensorType t) {
  int64_t bytes = 0;
  if (__builtin_mul_overflow(rt::numel(t.shape), static_cast<int64_t>(rt::dtype_size(t.dtype)), &bytes))
    throw OpError("a " + std::string(rt::dtype_name(t.dtype)) + rt::shape_str(t.shape) + " tensor has more than 2^63 - 1 bytes");
  return t;
}

TensorType full_type(const Arg& shape, const Arg& fill, const Arg& device, const Arg& dtype) {
  TensorType t;
  t.shape = shape_arg(shape);
  t.device = device_of(device);
  if (!fill.is_number()) throw OpError("argument 'fill_value' must be a number, got " + kind_name(fill));
  if (dtype.kind != K::None) t.dtype = dtype_arg(dtype, "dtype");
  else t.dtype = fill.kind == K::Float ? DType::f32 : fill.kind == K::Int ? DType::i64 : DType::b8;
  return countable(t);
}

TensorType iota_type(const Arg& n, const Arg& start, const Arg& step, const Arg& device, const Arg& dtype) {
  int64_t len = int_arg(n, "length");
  if (len < 0) throw OpError("length must be non-negative");
  int64_t first = int_arg(start, "start"), by = int_arg(step, "step");
  // start + (len - 1) * step must be an i64, as every element is.
  int64_t span = 0, last = 0;
  if (len > 0 && (__builtin_mul_overflow(len - 1, by, &span) || __builtin_add_overflow(first, span, &last)))
    throw OpError("iota(" + std::to_string(len) + ", start=" + std::to_string(first) + ", step=" + std::to_string(by) +
                  ") passes the 64-bit integers");
  TensorType t;
  t.shape = {len};
  t.device = device_of(device);
  t.dtype = dtype_arg(dtype, "dtype");
  return countable(t);
}

TensorType uniform_type(const Arg& shape, const Arg& lo, const Arg& hi, const Arg& device, const Arg& dtype) {
  TensorType t;
  t.shape = shape_arg(shape);
  t.device = device_of(device);
  t.dtype = dtype_arg(dtype, "dtype");
  if (!rt::is_float(t.dtype)) throw OpError(std::string("uniform needs a float dtype, got ") + rt::dtype_name(t.dtype));
  to_scalar(lo);
  to_scalar(hi);
  return countable(t);
}

int64_t take_dim(const Arg& a, const Arg& dim) {
  const int64_t rank = static_cast<int64_t>(tensor_type(a, "a").shape.size());
  const int64_t d = int_arg(dim, "dim");
  if (d < -rank || d >= rank) throw OpError("dim " + std::to_string(d) + " is out of range for a tensor of rank " + std::to_string(rank));
  return d < 0 ? d + rank : d;
}

TensorType take_type(const Arg& a, const Arg& index, const Arg& dim) {
  TensorType t = tensor_type(a, "a"), i = tensor_type(index, "index");
  if (t.shape.empty()) throw OpError("take needs a tensor of rank >= 1");
  const int64_t d = take_dim(a, dim);
  if (!rt::is_int(i.dtype)) throw OpError(std::string("index must be an integer tensor, got ") + rt::dtype_name(i.dtype));
  Shape s(t.shape.begin(), t.shape.begin() + d);
  s.insert(s.end(), i.shape.begin(), i.shape.end());
  s.insert(s.end(), t.shape.begin() + d + 1, t.shape.end());
  t.shape = s;
  return t;
}

TensorType take_backward_type(const Arg& grad, const Arg& index, const Arg& num_rows) {
  TensorType g = tensor_type(grad, "grad"), i = tensor_type(index, "index");
  if (!rt::is_int(i.dtype)) throw OpError(std::string("index must be an integer tensor, got ") + rt::dtype_name(i.dtype));
  int64_t n = int_arg(num_rows, "num_rows");
  if (g.shape.size() < i.shape.size() || !std::equal(i.shape.begin(), i.shape.end(), g.shape.begin()))
    throw OpError("grad shape " + rt::shape_str(g.shape) + " does not start with index shape " + rt::shape_str(i.shape));
  Shape s{n};
  s.insert(s.end(), g.shape.begin() + i.shape.size(), g.shape.end());
  g.shape = s;
  return g;
}

bool bool_arg(const Arg& a, const char* what) {
  if (a.kind != Arg::Kind::Bool) throw OpError(std::string(what) + " must be True or False");
  return a.b;
}

double number_arg(const Arg& a, const char* what) {
  if (!a.is_number() || a.kind == Arg::Kind::Bool) throw OpError(std::string(what) + " must be a number");
  return a.number();
}

std::vector<TensorType> attention_types(const Arg& query, const Arg& key, const Arg& value, const Arg& causal, const Arg& scale,
                                       const Arg& mask) {
  TensorType q = tensor_type(query, "query"), k = tensor_type(key, "key"), v = tensor_type(value, "value");
  bool_arg(causal, "is_causal");
  double sc = number_arg(scale, "scale");
  if (!std::isfinite(sc)) throw OpError("scale must be finite");
  auto shapes = [&] { return rt::shape_str(q.shape) + ", " + rt::shape_str(k.shape) + ", " + rt::shape_str(v.shape); };
  if (q.shape.size() < 2 || k.shape.size() != q.shape.size() || v.shape.size() != q.shape.size())
    throw OpError("query, key and value need the same rank (2 or more), got " + shapes());
  size_t r = q.shape.size();
  if (!std::equal(q.shape.begin(), q.shape.end() - 2, k.shape.begin()) || !std::equal(q.shape.begin(), q.shape.end() - 2, v.shape.begin()))
    throw OpError("query, key and value need the same batch dimensions, got " + shapes());
  if (k.shape[r - 1] != q.shape[r - 1] || v.shape[r - 2] != k.shape[r - 2])
    throw OpError("key must be [..., S, E] and value [..., S, Ev] for a query [..., L, E], got " + shapes());
  if (q.dtype != k.dtype || q.dtype != v.dtype || !rt::is_float(q.dtype))
    throw OpError(std::string("query, key and value need one floating-point dtype, got ") + rt::dtype_name(q.dtype) + ", " +
                  rt::dtype_name(k.dtype) + ", " + rt::dtype_name(v.dtype));
  if (mask.kind != Arg::Kind::None) {
    TensorType m = tensor_type(mask, "attn_mask");
    if (m.dtype != DType::b8 && !rt::is_float(m.dtype))
      throw OpError(std::string("attn_mask must be b8 or floating-point, got ") + rt::dtype_name(m.dtype));
    rt::Shape scores(q.shape.begin(), q.shape.end() - 1);
    scores.push_back(k.shape[r - 2]);
    bool ok = m.shape.size() <= scores.size();
    for (size_t i = 0; ok && i < m.shape.size(); ++i) {
      const int64_t want = scores[scores.size() - m.shape.size() + i];
      ok = m.shape[i] == 1 || m.shape[i] == want;
    }
    if (!ok) throw OpError("attn_mask " + rt::shape_str(m.shape) + " does not broadcast to the scores " + rt::shape_str(scores));
  }
  TensorType out = q, lse = q;
  out.shape.back() = v.shape.back();
  lse.shape.pop_back();
  lse.dtype = q.dtype == DType::f64 ? DType::f64 : DType::f32;
  return {out, lse};
}

std::vector<TensorType> attention_backward_types(const std::vector<Arg>& a) {
  std::vector<TensorType> fw = attention_types(a[1], a[2], a[3], a[6], a[7], a.size() > 8 ? a[8] : Arg{});
  TensorType g = tensor_type(a[0], "grad"), o = tensor_type(a[4], "out"), lse = tensor_type(a[5], "lse");
  if (g.shape != fw[0].shape || g.dtype != fw[0].dtype || o.shape != fw[0].shape || o.dtype != fw[0].dtype)
    throw OpError("grad and out must be " + std::string(rt::dtype_name(fw[0].dtype)) + rt::shape_str(fw[0].shape) + ", got " +
                  rt::dtype_name(g.dtype) + rt::shape_str(g.shape) + " and " + rt::dtype_name(o.dtype) + rt::shape_str(o.shape));
  if (lse.shape != fw[1].shape || lse.dtype != fw[1].dtype)
    throw OpError("lse must be " + std::string(rt::dtype_name(fw[1].dtype)) + rt::shape_str(fw[1].shape) + ", got " +
                  rt::dtype_name(lse.dtype) + rt::shape_str(lse.shape));
  return {tensor_type(a[1], "query"), tensor_type(a[2], "key"), tensor_type(a[3], "value")};
}

}  // namespace tracer::ir
