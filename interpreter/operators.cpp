// Python semantics of operators on script values; tensor operands become primitive calls.
#include <cmath>

#include "interpreter/format.h"
#include "interpreter/interp.h"
#include "interpreter/unparse.h"

namespace tracer::interp {

using ast::Op;

namespace {

const char* prim_for(Op op) {
  switch (op) {
    case Op::Add: return "add";
    case Op::Sub: return "sub";
    case Op::Mul: return "mul";
    case Op::Div: return "div";
    case Op::FloorDiv: return "floor_divide";
    case Op::Mod: return "remainder";
    case Op::Pow: return "pow";
    case Op::MatMul: return "matmul";
    case Op::BitAnd: return "bitwise_and";
    case Op::BitOr: return "bitwise_or";
    case Op::BitXor: return "bitwise_xor";
    case Op::Lt: return "lt";
    case Op::Le: return "le";
    case Op::Gt: return "gt";
    case Op::Ge: return "ge";
    case Op::Eq: return "eq";
    case Op::Ne: return "ne";
    default: return nullptr;
  }
}

const char* op_symbol(Op op) { return ast::op_text(op); }

int64_t as_i(const Value& v) { return v.is(VT::Int) ? v.as_int() : int64_t(v.as_bool()); }

int64_t floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

// base ** exp for integers; false when the result does not fit in 64 bits. (The base is squared
// only while higher bits of exp remain, so 2 ** 62 does not overflow on the way.)
bool int_pow(int64_t base, int64_t exp, Value* out) {
  if (exp < 0) {
    *out = Value::number(std::pow(double(base), double(exp)));
    return true;
  }
  int64_t r = 1;
  while (exp) {
    if ((exp & 1) && __builtin_mul_overflow(r, base, &r)) return false;
    exp >>= 1;
    if (exp && __builtin_mul_overflow(base, base, &base)) return false;
  }
  *out = Value::integer(r);
  return true;
}

std::vector<Value> repeat(Interpreter& in, const std::vector<Value>& xs, int64_t n, SourceLoc loc) {
  std::vector<Value> out;
  for (int64_t i = 0; i < n; ++i) {
    in.poll(loc);
    out.insert(out.end(), xs.begin(), xs.end());
  }
  return out;
}

bool identical(const Value& a, const Value& b) {
  if (a.type() != b.type()) return false;
  if (a.is_obj()) return a.obj() == b.obj();
  return values_equal(a, b);
}

}  // namespace

Value Interpreter::binary(Op op, const Value& a, const Value& b, SourceLoc loc) {
  poll(loc);  // sum() over a long sequence
  if (a.is(VT::Int) && b.is(VT::Int)) {
    // The common case first, exactly: comparisons as integers (not through double, which
    // rounds above 2^53), and overflow past 64 bits reported instead of wrapping.
    int64_t i = a.as_int(), j = b.as_int(), r = 0;
    switch (op) {
      case Op::Add:
        if (__builtin_add_overflow(i, j, &r)) fail(loc, "integer overflow in +");
        return Value::integer(r);
      case Op::Sub:
        if (__builtin_sub_overflow(i, j, &r)) fail(loc, "integer overflow in -");
        return Value::integer(r);
      case Op::Mul:
        if (__builtin_mul_overflow(i, j, &r)) fail(loc, "integer overflow in *");
        return Value::integer(r);
      case Op::FloorDiv:
        if (j == 0) fail(loc, "integer division or modulo by zero");
        if (i == INT64_MIN && j == -1) fail(loc, "integer overflow in //");
        return Value::integer(floordiv(i, j));
      case Op::Mod:
        if (j == 0) fail(loc, "integer division or modulo by zero");
        if (j == -1) return Value::integer(0);
        return Value::integer(i - floordiv(i, j) * j);
      case Op::Lt: return Value::boolean(i < j);
      case Op::Le: return Value::boolean(i <= j);
      case Op::Gt: return Value::boolean(i > j);
      case Op::Ge: return Value::boolean(i >= j);
      case Op::Eq: return Value::boolean(i == j);
      case Op::Ne: return Value::boolean(i != j);
      default: break;
    }
  }
  switch (op) {
    case Op::In: return Value::boolean(contains(b, a, loc));
    case Op::NotIn: return Value::boolean(!contains(b, a, loc));
    case Op::Is: return Value::boolean(identical(a, b));
    case Op::IsNot: return Value::boolean(!identical(a, b));
    default: break;
  }
  if (a.is_tensorish() || b.is_tensorish()) {
    const char* prim = prim_for(op);
    if (!prim) fail(loc, std::string("operator '") + op_symbol(op) + "' is not defined for tensors");
    CallArgs args;
    args.pos = {a, b};
    return call_op(*ir::find_op(prim), std::move(args), loc);
  }
  if (a.is_number() && b.is_number()) {
    bool fl = a.is(VT::Float) || b.is(VT::Float);
    double x = a.to_double(), y = b.to_double();
    int64_t i = fl ? 0 : as_i(a), j = fl ? 0 : as_i(b);
    switch (op) {
      case Op::Add: return fl ? Value::number(x + y) : Value::integer(i + j);
      case Op::Sub: return fl ? Value::number(x - y) : Value::integer(i - j);
      case Op::Mul: return fl ? Value::number(x * y) : Value::integer(i * j);
      case Op::Div:
        if (y == 0) fail(loc, "division by zero");
        return Value::number(x / y);
      case Op::FloorDiv:
        if (y == 0) fail(loc, "integer division or modulo by zero");
        return fl ? Value::number(std::floor(x / y)) : Value::integer(floordiv(i, j));
      case Op::Mod:
        if (y == 0) fail(loc, "integer division or modulo by zero");
        if (fl) {
          double r = std::fmod(x, y);
          if (r != 0 && ((r < 0) != (y < 0))) r += y;
          return Value::number(r);
        }
        return Value::integer(i - floordiv(i, j) * j);
      case Op::Pow: {
        if (fl) return Value::number(std::pow(x, y));
        Value r;
        if (!int_pow(i, j, &r)) fail(loc, "integer overflow in **");
        return r;
      }
      case Op::Lt: return Value::boolean(fl ? x < y : i < j);
      case Op::Le: return Value::boolean(fl ? x <= y : i <= j);
      case Op::Gt: return Value::boolean(fl ? x > y : i > j);
      case Op::Ge: return Value::boolean(fl ? x >= y : i >= j);
      case Op::Eq: return Value::boolean(values_equal(a, b));
      case Op::Ne: return Value::boolean(!values_equal(a, b));
      case Op::BitAnd: if (!fl) return Value::integer(i & j); break;
      case Op::BitOr: if (!fl) return Value::integer(i | j); break;
      case Op::BitXor: if (!fl) return Value::integer(i ^ j); break;
      case Op::LShift: if (!fl && j >= 0 && j < 64) return Value::integer(i << j); break;
      case Op::RShift: if (!fl && j >= 0 && j < 64) return Value::integer(i >> j); break;
      default: break;
    }
  }
  if (op == Op::Eq) return Value::boolean(values_equal(a, b));
  if (op == Op::Ne) return Value::boolean(!values_equal(a, b));
  if (op == Op::Lt || op == Op::Le || op == Op::Gt || op == Op::Ge) {
    int c = compare(a, b, loc);
    bool r = op == Op::Lt ? c < 0 : op == Op::Le ? c <= 0 : op == Op::Gt ? c > 0 : c >= 0;
    return Value::boolean(r);
  }
  if (op == Op::Add && a.type() == b.type()) {
    if (a.is(VT::Str)) {
      check_size(a.as<StrObj>()->s.size() + b.as<StrObj>()->s.size(), 1, "a string", loc);
      return str_value(a.as<StrObj>()->s + b.as<StrObj>()->s);
    }
    if (a.is(VT::List) || a.is(VT::Tuple)) {
      std::vector<Value> xs = iterate(a, loc), ys = iterate(b, loc);
      check_size(xs.size() + ys.size(), sizeof(Value), a.is(VT::List) ? "a list" : "a tuple", loc);
      xs.insert(xs.end(), ys.begin(), ys.end());
      return a.is(VT::List) ? make<ListObj>(std::move(xs)) : make<TupleObj>(std::move(xs));
    }
  }
  if (op == Op::Mul && (a.is(VT::Int) || b.is(VT::Int))) {
    const Value& seq = a.is(VT::Int) ? b : a;
    int64_t n = a.is(VT::Int) ? a.as_int() : b.as_int();
    if (n > 0 && (seq.is(VT::Str) || seq.is(VT::List) || seq.is(VT::Tuple))) {
      const uint64_t len = seq.is(VT::Str) ? seq.as<StrObj>()->s.size()
                           : seq.is(VT::List) ? seq.as<ListObj>()->items.size() : seq.as<TupleObj>()->items.size();
      // len * n without overflow: more than the limit either way when it would overflow.
      const uint64_t total = len == 0 ? 0 : static_cast<uint64_t>(n) > UINT64_MAX / len ? UINT64_MAX : len * static_cast<uint64_t>(n);
      check_size(total, seq.is(VT::Str) ? 1 : sizeof(Value), seq.is(VT::Str) ? "a string" : seq.is(VT::List) ? "a list" : "a tuple", loc);
    }
    if (seq.is(VT::Str)) {
      std::string out;
      for (int64_t k = 0; k < n; ++k) {
        poll(loc);
        out += seq.as<StrObj>()->s;
      }
      return str_value(out);
    }
    if (seq.is(VT::List)) return make<ListObj>(repeat(*this, seq.as<ListObj>()->items, n, loc));
    if (seq.is(VT::Tuple)) return make<TupleObj>(repeat(*this, seq.as<TupleObj>()->items, n, loc));
  }
  if (op == Op::Mod && a.is(VT::Str)) {  // printf-style formatting, as Python's (interpreter/format.h)
    try {
      return str_value(percent_format(a.as<StrObj>()->s, b));
    } catch (const std::invalid_argument& e) {
      fail(loc, e.what());
    }
  }
  fail(loc, std::string("unsupported operand types for ") + op_symbol(op) + ": '" + type_name(a.type()) + "' and '" +
                type_name(b.type()) + "'");
}

int Interpreter::compare(const Value& a, const Value& b, SourceLoc loc) {
  poll(loc);  // sorted(), min() and max() over a long sequence
  if (a.is_number() && b.is_number()) {
    double x = a.to_double(), y = b.to_double();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is(VT::Str) && b.is(VT::Str)) {
    int c = a.as<StrObj>()->s.compare(b.as<StrObj>()->s);
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.type() == b.type() && (a.is(VT::List) || a.is(VT::Tuple))) {
    const auto& xs = a.is(VT::List) ? a.as<ListObj>()->items : a.as<TupleObj>()->items;
    const auto& ys = b.is(VT::List) ? b.as<ListObj>()->items : b.as<TupleObj>()->items;
    for (size_t i = 0; i < xs.size() && i < ys.size(); ++i) {
      if (values_equal(xs[i], ys[i])) continue;
      return compare(xs[i], ys[i], loc);
    }
    return xs.size() < ys.size() ? -1 : xs.size() > ys.size() ? 1 : 0;
  }
  fail(loc, std::string("'<' not supported between instances of '") + type_name(a.type()) + "' and '" +
                type_name(b.type()) + "'");
}

bool Interpreter::truth(const Value& v, SourceLoc loc) {
  // A concrete tensor (eager mode) has a value: a one-element one is true when nonzero, as in
  // PyTorch; one of more elements is ambiguous.
  if (v.is(VT::Tensor)) {
    const rt::Tensor& t = v.as<TensorObj>()->host();
    if (t.numel() != 1)
      fail(loc, "the truth value of a tensor of " + std::to_string(t.numel()) + " elements (shape " + rt::shape_str(t.shape()) +
                    ") is ambiguous; reduce it first (sum, amax, any(t.tolist()))");
    return t.get(0) != 0;
  }
  if (v.is_tensorish())
    fail(loc, "the truth value of a tensor is not known while tracing; branch on static values "
              "(shapes, dtypes, Python numbers) instead");
  return truthy(v);
}

bool Interpreter::contains(const Value& c, const Value& x, SourceLoc loc) {
  switch (c.type()) {
    case VT::Str:
      if (!x.is(VT::Str)) fail(loc, "'in <string>' requires a string as left operand");
      return c.as<StrObj>()->s.find(x.as<StrObj>()->s) != std::string::npos;
    case VT::Dict: return c.as<DictObj>()->find(x) != nullptr;
    case VT::Namespace: return x.is(VT::Str) && c.as<NamespaceObj>()->lookup(x.as<StrObj>()->s) != nullptr;
    case VT::Range: {
      if (!x.is(VT::Int)) return false;
      auto* r = c.as<RangeObj>();
      int64_t v = x.as_int();
      if (r->step > 0 ? (v < r->start || v >= r->stop) : (v > r->start || v <= r->stop)) return false;
      return (static_cast<__int128>(v) - r->start) % r->step == 0;
    }
    default:
      for (const Value& y : iterate(c, loc))
        if (values_equal(x, y)) return true;
      return false;
  }
}

std::vector<Value> Interpreter::iterate(const Value& v, SourceLoc loc) {
  switch (v.type()) {
    case VT::List: return v.as<ListObj>()->items;
    case VT::Tuple: return v.as<TupleObj>()->items;
    case VT::Str: {
      std::vector<Value> out;
      for (char c : v.as<StrObj>()->s) {
        poll(loc);
        out.push_back(str_value(std::string(1, c)));
      }
      return out;
    }
    case VT::Dict: {
      std::vector<Value> out;
      for (auto& kv : v.as<DictObj>()->items()) out.push_back(kv.first);
      return out;
    }
    case VT::Range: {
      auto* r = v.as<RangeObj>();
      std::vector<Value> out;
      int64_t n = r->size();
      check_size(static_cast<uint64_t>(n), sizeof(Value), "a list", loc);
      out.reserve(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        poll(loc);
        out.push_back(Value::integer(r->start + i * r->step));
      }
      return out;
    }
    default: fail(loc, std::string("'") + type_name(v.type()) + "' object is not iterable");
  }
}

static int64_t norm_index(Interpreter& in, int64_t i, size_t n, SourceLoc loc, const char* what) {
  int64_t len = static_cast<int64_t>(n);
  if (i < 0) i += len;
  if (i < 0 || i >= len) in.fail(loc, std::string(what) + " index out of range");
  return i;
}

// Python slice bounds for a sequence of length n (any step sign).
static void slice_bounds(Interpreter& in, const SliceObj& s, int64_t n, int64_t* start, int64_t* stop, int64_t* step,
                         SourceLoc loc) {
  auto get = [&](const Value& v, int64_t dflt) {
    if (v.is_none()) return dflt;
    if (!v.is(VT::Int)) in.fail(loc, "slice indices must be integers or None");
    return v.as_int();
  };
  *step = get(s.step, 1);
  if (*step == 0) in.fail(loc, "slice step cannot be zero");
  bool neg = *step < 0;
  auto clamp = [&](int64_t i, bool is_start) {
    if (i < 0) i += n;
    if (neg) return std::max<int64_t>(-1, std::min<int64_t>(i, n - 1));
    (void)is_start;
    return std::max<int64_t>(0, std::min<int64_t>(i, n));
  };
  *start = s.lower.is_none() ? (neg ? n - 1 : 0) : clamp(get(s.lower, 0), true);
  *stop = s.upper.is_none() ? (neg ? -1 : n) : clamp(get(s.upper, 0), false);
}

template <class F>
static void each_slice_index(Interpreter& in, const SliceObj& s, int64_t n, SourceLoc loc, F f) {
  int64_t a, b, st;
  slice_bounds(in, s, n, &a, &b, &st, loc);
  for (int64_t i = a; st > 0 ? i < b : i > b; i += st) f(i);
}

Value tensor_subscript(Interpreter& in, const Value& t, const Value& index, SourceLoc loc);

Value Interpreter::subscript(const Value& obj, const Value& index, SourceLoc loc) {
  switch (obj.type()) {
    case VT::List:
    case VT::Tuple: {
      const auto& items = obj.is(VT::List) ? obj.as<ListObj>()->items : obj.as<TupleObj>()->items;
      if (index.is(VT::Slice)) {
        std::vector<Value> out;
        each_slice_index(*this, *index.as<SliceObj>(), static_cast<int64_t>(items.size()), loc,
                         [&](int64_t i) { out.push_back(items[i]); });
        return obj.is(VT::List) ? make<ListObj>(std::move(out)) : make<TupleObj>(std::move(out));
      }
      if (!index.is(VT::Int) && !index.is(VT::Bool))
        fail(loc, std::string(type_name(obj.type())) + " indices must be integers, not " + type_name(index.type()));
      return items[norm_index(*this, as_i(index), items.size(), loc, type_name(obj.type()))];
    }
    case VT::Str: {
      const std::string& s = obj.as<StrObj>()->s;
      if (index.is(VT::Slice)) {
        std::string out;
        each_slice_index(*this, *index.as<SliceObj>(), static_cast<int64_t>(s.size()), loc, [&](int64_t i) { out += s[i]; });
        return str_value(out);
      }
      if (!index.is(VT::Int)) fail(loc, "string indices must be integers");
      return str_value(std::string(1, s[norm_index(*this, index.as_int(), s.size(), loc, "string")]));
    }
    case VT::Dict: {
      Value* v = obj.as<DictObj>()->find(index);
      if (!v) fail(loc, "key " + repr(index) + " not found");
      return *v;
    }
    case VT::Range: {
      auto* r = obj.as<RangeObj>();
      if (!index.is(VT::Int)) fail(loc, "range indices must be integers");
      return Value::integer(r->start + norm_index(*this, index.as_int(), r->size(), loc, "range") * r->step);
    }
    case VT::DType: {
      // f32[2, 3]: a tensor type annotation.
      ir::TensorType t;
      t.dtype = obj.as_dtype();
      std::vector<Value> dims = index.is(VT::Tuple) ? index.as<TupleObj>()->items : std::vector<Value>{index};
      for (const Value& d : dims) {
        if (!d.is(VT::Int) || d.as_int() < 0) fail(loc, "tensor type dimensions must be non-negative integers, got " + repr(d));
        t.shape.push_back(d.as_int());
      }
      return make<TypeObj>(std::move(t));
    }
    case VT::Tensor:
    case VT::Proxy: return tensor_subscript(*this, obj, index, loc);
    default: fail(loc, std::string("'") + type_name(obj.type()) + "' object is not subscriptable");
  }
}

}  // namespace tracer::interp
