// Builtin functions: Python's familiar set plus tensor helpers (the namespaces that hold them and
// map Thunder's module prefixes to ops: interpreter/namespaces.cpp).
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <limits>
#include <map>

#include "interpreter/format.h"
#include "interpreter/builtins.h"
#include "interpreter/compiled.h"
#include "interpreter/interp.h"
#include "interpreter/trace_api.h"
#include "runtime/summary.h"
#include "stdlib/stdlib.h"

namespace tracer::interp {

void want_args(Interpreter& in, const CallArgs& a, const char* name, size_t lo, size_t hi, SourceLoc loc) {
  if (a.pos.size() < lo || a.pos.size() > hi) {
    std::string range = lo == hi ? std::to_string(lo) : std::to_string(lo) + " to " + std::to_string(hi);
    in.fail(loc, std::string(name) + "() takes " + range + " argument" + (hi == 1 ? "" : "s") + " (" +
                     std::to_string(a.pos.size()) + " given)");
  }
}

namespace {

const Value* kwarg(const CallArgs& a, const char* name) {
  for (const auto& [k, v] : a.kw)
    if (k == name) return &v;
  return nullptr;
}

int64_t want_int(Interpreter& in, const Value& v, const char* fn, int n, SourceLoc loc) {
  if (v.is(VT::Int)) return v.as_int();
  if (v.is(VT::Bool)) return v.as_bool();
  in.fail(loc, "bad argument #" + std::to_string(n) + " to '" + fn + "' (int expected, got " + type_name(v.type()) + ")");
}

bool any_tensor(const CallArgs& a) {
  for (const Value& v : a.pos)
    if (v.is_tensorish()) return true;
  return false;
}

Value b_print(Interpreter& in, CallArgs& a, SourceLoc) {
  std::string sep = " ", end = "\n", out;
  if (const Value* s = kwarg(a, "sep")) sep = to_str(*s);
  if (const Value* e = kwarg(a, "end")) end = to_str(*e);
  for (size_t i = 0; i < a.pos.size(); ++i) out += (i ? sep : "") + display(a.pos[i]);
  in.on_print(out + end);
  return Value();
}

Value b_len(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "len", 1, 1, loc);
  const Value& v = a.pos[0];
  switch (v.type()) {
    case VT::Str: return Value::integer(static_cast<int64_t>(v.as<StrObj>()->s.size()));
    case VT::List: return Value::integer(static_cast<int64_t>(v.as<ListObj>()->items.size()));
    case VT::Tuple: return Value::integer(static_cast<int64_t>(v.as<TupleObj>()->items.size()));
    case VT::Dict: return Value::integer(static_cast<int64_t>(v.as<DictObj>()->size()));
    case VT::Range: return Value::integer(v.as<RangeObj>()->size());
    case VT::Tensor:
    case VT::Proxy: {
      rt::Shape s = tensor_shape(v);
      if (s.empty()) in.fail(loc, "len() of a 0-d tensor");
      return Value::integer(s[0]);
    }
    default: in.fail(loc, std::string("object of type '") + type_name(v.type()) + "' has no len()");
  }
}

Value b_range(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "range", 1, 3, loc);
  int64_t x[3];
  for (size_t i = 0; i < a.pos.size(); ++i) x[i] = want_int(in, a.pos[i], "range", static_cast<int>(i + 1), loc);
  if (a.pos.size() == 1) return make<RangeObj>(0, x[0], 1);
  int64_t step = a.pos.size() == 3 ? x[2] : 1;
  if (step == 0) in.fail(loc, "range() arg 3 must not be zero");
  if (range_size(x[0], x[1], step) > std::numeric_limits<int64_t>::max())
    in.fail(loc, "range(" + std::to_string(x[0]) + ", " + std::to_string(x[1]) + ", " + std::to_string(step) +
                     ") has more than 2^63 - 1 elements");
  return make<RangeObj>(x[0], x[1], step);
}

Value b_enumerate(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "enumerate", 1, 2, loc);
  int64_t i = a.pos.size() > 1 ? want_int(in, a.pos[1], "enumerate", 2, loc) : 0;
  if (const Value* s = kwarg(a, "start")) i = want_int(in, *s, "enumerate", 2, loc);
  std::vector<Value> out;
  std::vector<Value> xs = in.iterate(a.pos[0], loc);
  if (!xs.empty() && i > std::numeric_limits<int64_t>::max() - static_cast<int64_t>(xs.size() - 1))
    in.fail(loc, "enumerate(start=" + std::to_string(i) + ") counts past 2^63 - 1");
  for (Value& x : xs) out.push_back(make<TupleObj>(std::vector<Value>{Value::integer(i++), std::move(x)}));
  return make<ListObj>(std::move(out));
}

Value b_zip(Interpreter& in, CallArgs& a, SourceLoc loc) {
  std::vector<std::vector<Value>> seqs;
  size_t n = SIZE_MAX;
  for (const Value& v : a.pos) {
    seqs.push_back(in.iterate(v, loc));
    n = std::min(n, seqs.back().size());
  }
  std::vector<Value> out;
  for (size_t i = 0; !seqs.empty() && i < n; ++i) {
    std::vector<Value> row;
    for (auto& s : seqs) row.push_back(s[i]);
    out.push_back(make<TupleObj>(std::move(row)));
  }
  return make<ListObj>(std::move(out));
}

Value b_list(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "list", 0, 1, loc);
  return make<ListObj>(a.pos.empty() ? std::vector<Value>{} : in.iterate(a.pos[0], loc));
}

Value b_tuple(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "tuple", 0, 1, loc);
  return make<TupleObj>(a.pos.empty() ? std::vector<Value>{} : in.iterate(a.pos[0], loc));
}

Value b_dict(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "dict", 0, 1, loc);
  auto* d = new DictObj();
  Value v(d);
  if (!a.pos.empty()) {
    if (a.pos[0].is(VT::Dict)) {
      for (auto& kv : a.pos[0].as<DictObj>()->items()) d->set(kv.first, kv.second);
    } else {
      for (const Value& p : in.iterate(a.pos[0], loc)) {
        std::vector<Value> kv = in.iterate(p, loc);
        if (kv.size() != 2) in.fail(loc, "dict() needs pairs");
        d->set(kv[0], kv[1]);
      }
    }
  }
  for (auto& [k, x] : a.kw) d->set(str_value(k), x);
  return v;
}

Value b_str(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "str", 0, 1, loc);
  return str_value(a.pos.empty() ? "" : to_str(a.pos[0]));
}

Value b_format(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "format", 1, 2, loc);
  if (a.pos.size() == 2 && !a.pos[1].is(VT::Str)) in.fail(loc, "format() argument 2 must be str, not " + std::string(type_name(a.pos[1].type())));
  try {
    return str_value(format_spec(a.pos[0], a.pos.size() == 2 ? a.pos[1].as<StrObj>()->s : ""));
  } catch (const std::invalid_argument& e) {
    in.fail(loc, std::string("format(): ") + e.what());
  }
}

Value b_repr(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "repr", 1, 1, loc);
  return str_value(repr(a.pos[0]));
}

Value b_int(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "int", 0, 1, loc);
  if (a.pos.empty()) return Value::integer(0);
  const Value& v = a.pos[0];
  if (v.is(VT::Int) || v.is(VT::Bool)) return Value::integer(v.is(VT::Int) ? v.as_int() : v.as_bool());
  if (v.is(VT::Float)) {
    int64_t x = 0;
    std::string why = float_to_int(v.as_float(), &x);
    if (!why.empty()) in.fail(loc, why);
    return Value::integer(x);
  }
  if (v.is(VT::Str)) {
    // Surrounding whitespace is allowed, as in Python: int(" 3 ") is 3.
    const std::string& raw = v.as<StrObj>()->s;
    const size_t b = raw.find_first_not_of(" \t\n\r"), e = raw.find_last_not_of(" \t\n\r");
    const std::string s = b == std::string::npos ? "" : raw.substr(b, e - b + 1);
    char* end = nullptr;
    errno = 0;
    long long x = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || std::isspace(static_cast<unsigned char>(s[0]))) in.fail(loc, "invalid literal for int(): " + repr(v));
    if (errno == ERANGE) in.fail(loc, "int(" + repr(v) + "): it does not fit in 64 bits (tracer's integers are 64-bit)");
    return Value::integer(x);
  }
  if (v.is_tensorish()) {
    Value x = tensor_item(in, v, loc, "int(t)");
    if (x.is(VT::Float)) {
      int64_t r = 0;
      std::string why = float_to_int(x.as_float(), &r);
      if (!why.empty()) in.fail(loc, why);
      return Value::integer(r);
    }
    return Value::integer(x.is(VT::Int) ? x.as_int() : x.as_bool());
  }
  in.fail(loc, std::string("int() argument must be a number or a string, not '") + type_name(v.type()) + "'");
}

Value b_float(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "float", 0, 1, loc);
  if (a.pos.empty()) return Value::number(0);
  const Value& v = a.pos[0];
  if (v.is_number()) return Value::number(v.to_double());
  if (v.is(VT::Str)) {
    std::string s = v.as<StrObj>()->s;
    if (s == "inf" || s == "+inf") return Value::number(INFINITY);
    if (s == "-inf") return Value::number(-INFINITY);
    if (s == "nan") return Value::number(NAN);
    char* end = nullptr;
    double x = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0') in.fail(loc, "could not convert string to float: " + repr(v));
    return Value::number(x);
  }
  if (v.is_tensorish()) return Value::number(tensor_item(in, v, loc, "float(t)").to_double());
  in.fail(loc, std::string("float() argument must be a number or a string, not '") + type_name(v.type()) + "'");
}

// tensor(data, dtype=None): a concrete tensor from a number or nested lists of numbers, as
// torch.tensor: f32 if any is a float, else i64 if any is an int, else b8.
void tensor_data(Interpreter& in, const Value& v, size_t dim, rt::Shape* shape, std::vector<Value>* flat, bool* any_float,
                 bool* any_int, SourceLoc loc) {
  if (v.is(VT::List) || v.is(VT::Tuple)) {
    const auto& xs = v.is(VT::List) ? v.as<ListObj>()->items : v.as<TupleObj>()->items;
    if (dim == shape->size()) {
      if (!flat->empty()) in.fail(loc, "tensor(data): the lists are not rectangular (a number where a list is)");
      shape->push_back(static_cast<int64_t>(xs.size()));
    } else if ((*shape)[dim] != static_cast<int64_t>(xs.size())) {
      in.fail(loc, "tensor(data): the lists are not rectangular (lengths " + std::to_string((*shape)[dim]) + " and " +
                       std::to_string(xs.size()) + " at depth " + std::to_string(dim) + ")");
    }
    for (const Value& x : xs) tensor_data(in, x, dim + 1, shape, flat, any_float, any_int, loc);
    return;
  }
  if (v.is(VT::Tensor)) {
    const rt::Tensor& t = v.as<TensorObj>()->host();
    if (t.defined() && t.numel() == 1) return tensor_data(in, tensor_item(in, v, loc, "tensor(data)"), dim, shape, flat, any_float, any_int, loc);
  }
  if (!v.is_number()) in.fail(loc, std::string("tensor(data): the data are numbers or lists of numbers, got a ") + type_name(v.type()));
  if (dim != shape->size()) in.fail(loc, "tensor(data): the lists are not rectangular (a number where a list is)");
  *any_float = *any_float || v.is(VT::Float);
  *any_int = *any_int || v.is(VT::Int);
  in.poll(loc);
  flat->push_back(v);
}

Value b_tensor(Interpreter& in, CallArgs& a, SourceLoc loc) {
  if (a.pos.size() != 1) in.fail(loc, "tensor(data, dtype=None, device=None) takes the data");
  if (in.tracing()) in.fail(loc, "tensor(data) makes a concrete tensor, which a traced function cannot hold; pass it as an argument");
  rt::Shape shape;
  std::vector<Value> flat;
  bool any_float = false, any_int = false;
  tensor_data(in, a.pos[0], 0, &shape, &flat, &any_float, &any_int, loc);
  rt::DType dt = any_float ? rt::DType::f32 : any_int ? rt::DType::i64 : rt::DType::b8;
  if (const Value* d = kwarg(a, "dtype"); d && !d->is_none()) {
    if (!d->is(VT::DType)) in.fail(loc, "tensor(dtype=...) is a dtype like f32, got " + repr(*d));
    dt = d->as_dtype();
  }
  std::string device = "cpu";
  for (const auto& [k, v] : a.kw) {
    if (k == "device" && v.is(VT::Str)) device = v.as<StrObj>()->s;
    else if (k == "device" && !v.is_none()) in.fail(loc, "tensor(device=...) is 'cpu', 'cuda' or 'cuda:N', got " + repr(v));
    else if (k != "dtype" && k != "device") in.fail(loc, "tensor() got an unexpected keyword argument '" + k + "'");
  }
  rt::Tensor t = rt::Tensor::empty(dt, shape, &in.allocator());
  for (size_t i = 0; i < flat.size(); ++i) {
    if (dt == rt::DType::i64 && flat[i].is(VT::Int)) t.data_as<int64_t>()[i] = flat[i].as_int();
    else t.set(static_cast<int64_t>(i), flat[i].to_double());
  }
  if (device == "cpu") return make<TensorObj>(std::move(t));
  DeviceBackend* b = in.device_backend(device, loc);  // a missing GPU or a bad name is an error here
  return make<TensorObj>(b->upload(t), b);
}

// memory_stats(reset_peak=False, device=None): the bytes of a device's tensors now and at the peak
// since the last reset: the CPU allocator's, or a GPU's device allocator for "cuda"/"cuda:N" (None:
// the device compiled functions run on by default, `tracer run --device`).
Value b_memory_stats(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "memory_stats", 0, 0, loc);
  bool reset = false;
  std::string device = in.default_device;
  for (const auto& [k, v] : a.kw) {
    if (k == "reset_peak" && v.is(VT::Bool)) reset = v.as_bool();
    else if (k == "device" && v.is(VT::Str)) device = v.as<StrObj>()->s;
    else if (k == "device" && v.is_none()) continue;
    else in.fail(loc, "memory_stats(reset_peak=False, device=None) takes reset_peak (True or False) and device ('cpu', 'cuda', 'cuda:N')");
  }
  size_t current = 0, peak = 0;
  if (device == "cpu") {
    current = in.allocator().current_bytes();
    peak = in.allocator().peak_bytes();
    if (reset) in.allocator().reset_peak();
  } else {
    DeviceBackend* b = in.device_backend(device, loc);
    current = b->current_bytes();
    peak = b->peak_bytes();
    if (reset) b->reset_peak();
  }
  auto* d = new DictObj();
  Value out(d);
  d->set(str_value("allocated"), Value::integer(static_cast<int64_t>(current)));
  d->set(str_value("peak"), Value::integer(static_cast<int64_t>(peak)));
  d->set(str_value("device"), str_value(device));
  return out;
}

// synchronize(device=None): waits for the device's queued work (torch.cuda.synchronize()); the
// CPU runs each call to the end before it returns, so there it returns at once.
Value b_synchronize(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "synchronize", 0, 1, loc);
  Value d = a.pos.empty() ? Value() : a.pos[0];
  for (const auto& [k, v] : a.kw) {
    if (k == "device" && a.pos.empty()) d = v;
    else in.fail(loc, "synchronize(device=None) takes one device: 'cpu', 'cuda' or 'cuda:N' (None: tracer run --device's)");
  }
  std::string device = in.default_device;
  if (d.is(VT::Str)) device = d.as<StrObj>()->s;
  else if (!d.is_none()) in.fail(loc, "synchronize(device=None): the device is a string ('cpu', 'cuda', 'cuda:N'), got " + repr(d));
  if (device != "cpu") in.device_backend(device, loc)->synchronize();
  return Value();
}

Value b_perf_counter(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "time.perf_counter", 0, 0, loc);
  return Value::number(std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count());
}
Value b_time(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "time.time", 0, 0, loc);
  return Value::number(std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
}
const BuiltinDef kTime[] = {
    {"perf_counter", b_perf_counter, "time.perf_counter(): seconds on a monotonic clock, for measuring durations."},
    {"time", b_time, "time.time(): seconds since the epoch."},
};

Value b_bool(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "bool", 0, 1, loc);
  return Value::boolean(!a.pos.empty() && in.truth(a.pos[0], loc));
}

std::vector<Value> sorted_values(Interpreter& in, std::vector<Value> xs, const CallArgs& a, SourceLoc loc) {
  const Value* key = kwarg(a, "key");
  std::vector<Value> keys;
  for (const Value& x : xs) {
    if (key && !key->is_none()) {
      CallArgs c;
      c.pos.push_back(x);
      keys.push_back(in.call(*key, std::move(c), loc));
    } else {
      keys.push_back(x);
    }
  }
  std::vector<size_t> order(xs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t i, size_t j) { return in.compare(keys[i], keys[j], loc) < 0; });
  const Value* rev = kwarg(a, "reverse");
  if (rev && in.truth(*rev, loc)) {
    std::stable_sort(order.begin(), order.end(), [&](size_t i, size_t j) { return in.compare(keys[i], keys[j], loc) > 0; });
  }
  std::vector<Value> out;
  for (size_t i : order) out.push_back(xs[i]);
  return out;
}

Value b_sorted(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "sorted", 1, 1, loc);
  return make<ListObj>(sorted_values(in, in.iterate(a.pos[0], loc), a, loc));
}

Value b_reversed(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "reversed", 1, 1, loc);
  std::vector<Value> xs = in.iterate(a.pos[0], loc);
  std::reverse(xs.begin(), xs.end());
  return make<ListObj>(std::move(xs));
}

// slice(stop), slice(start, stop[, step]): the value a[start:stop:step] indexes with (Thunder
// prints its getitem and setitem keys so: (slice(None, 2, None), 0)).
Value b_slice(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "slice", 1, 3, loc);
  for (const Value& v : a.pos)
    if (!v.is(VT::None) && !v.is(VT::Int) && !v.is(VT::Proxy) && !v.is(VT::Tensor))
      in.fail(loc, std::string("slice() takes ints or None, got ") + type_name(v.type()));
  if (a.pos.size() == 1) return make<SliceObj>(Value(), a.pos[0], Value());
  return make<SliceObj>(a.pos[0], a.pos[1], a.pos.size() > 2 ? a.pos[2] : Value());
}

// namedtuple(typename, field_names): a constructor of tuples whose items are also read by name
// (collections.namedtuple's; torch.return_types are made by it). The constructor is the maker
// bound to an empty tuple that carries the names.
Value b_namedtuple_new(Interpreter& in, CallArgs& a, SourceLoc loc) {
  const std::shared_ptr<const TupleNames> names = a.pos[0].as<TupleObj>()->names;
  const size_t n = names->fields.size();
  if (a.pos.size() - 1 > n)
    in.fail(loc, names->type + "() takes " + std::to_string(n) + " values, got " + std::to_string(a.pos.size() - 1));
  std::vector<Value> items(n);
  std::vector<bool> given(n, false);
  for (size_t i = 1; i < a.pos.size(); ++i) items[i - 1] = a.pos[i], given[i - 1] = true;
  for (const auto& [k, v] : a.kw) {
    auto it = std::find(names->fields.begin(), names->fields.end(), k);
    if (it == names->fields.end()) in.fail(loc, names->type + "() got an unexpected field '" + k + "'");
    size_t i = static_cast<size_t>(it - names->fields.begin());
    if (given[i]) in.fail(loc, names->type + "() got field '" + k + "' twice");
    items[i] = v, given[i] = true;
  }
  for (size_t i = 0; i < n; ++i)
    if (!given[i]) in.fail(loc, names->type + "() is missing field '" + names->fields[i] + "'");
  return make<TupleObj>(std::move(items), names);
}
const BuiltinDef kNamedTupleNew{"namedtuple", b_namedtuple_new, "A named tuple's constructor: values by position or by field name."};

Value b_namedtuple(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "namedtuple", 2, 2, loc);
  if (!a.pos[0].is(VT::Str)) in.fail(loc, "namedtuple(typename, field_names): typename must be a str");
  auto names = std::make_shared<TupleNames>();
  names->type = a.pos[0].as<StrObj>()->s;
  std::vector<Value> given;
  if (a.pos[1].is(VT::Str)) {  // "x y" or "x, y"
    std::string f = a.pos[1].as<StrObj>()->s, cur;
    for (char c : f + " ") {
      if (c == ' ' || c == ',') {
        if (!cur.empty()) given.push_back(str_value(cur));
        cur.clear();
      } else {
        cur += c;
      }
    }
  } else {
    given = in.iterate(a.pos[1], loc);
  }
  for (const Value& v : given) {
    if (!v.is(VT::Str)) in.fail(loc, std::string("namedtuple: field names must be str, got ") + type_name(v.type()));
    const std::string& f = v.as<StrObj>()->s;
    bool ident = !f.empty() && !std::isdigit(static_cast<unsigned char>(f[0])) && f[0] != '_';
    for (char c : f) ident = ident && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
    if (!ident) in.fail(loc, "namedtuple: field name '" + f + "' is not an identifier (or starts with '_')");
    if (std::find(names->fields.begin(), names->fields.end(), f) != names->fields.end())
      in.fail(loc, "namedtuple: field '" + f + "' is named twice");
    names->fields.push_back(f);
  }
  return make<BoundMethodObj>(make<TupleObj>(std::vector<Value>{}, names), make<BuiltinObj>(&kNamedTupleNew));
}

Value b_any(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "any", 1, 1, loc);
  for (const Value& x : in.iterate(a.pos[0], loc)) {
    in.poll(loc);
    if (in.truth(x, loc)) return Value::boolean(true);
  }
  return Value::boolean(false);
}

Value b_all(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "all", 1, 1, loc);
  for (const Value& x : in.iterate(a.pos[0], loc)) {
    in.poll(loc);
    if (!in.truth(x, loc)) return Value::boolean(false);
  }
  return Value::boolean(true);
}

Value minmax(Interpreter& in, CallArgs& a, SourceLoc loc, bool is_max) {
  const char* name = is_max ? "max" : "min";
  if (any_tensor(a)) {
    if (a.pos.size() == 2) return in.call_ltorch(is_max ? "maximum" : "minimum", std::move(a), loc);
    return in.call_ltorch(is_max ? "amax" : "amin", std::move(a), loc);
  }
  if (a.pos.empty()) in.fail(loc, std::string(name) + "() expects at least one argument");
  std::vector<Value> xs = a.pos.size() == 1 ? in.iterate(a.pos[0], loc) : std::vector<Value>(a.pos.begin(), a.pos.end());
  if (xs.empty()) in.fail(loc, std::string(name) + "() arg is an empty sequence");
  std::vector<Value> s = sorted_values(in, xs, a, loc);
  return is_max ? s.back() : s.front();
}

Value b_max(Interpreter& in, CallArgs& a, SourceLoc loc) { return minmax(in, a, loc, true); }
Value b_min(Interpreter& in, CallArgs& a, SourceLoc loc) { return minmax(in, a, loc, false); }

Value b_sum(Interpreter& in, CallArgs& a, SourceLoc loc) {
  if (any_tensor(a)) return in.call_ltorch("sum", std::move(a), loc);
  want_args(in, a, "sum", 1, 2, loc);
  Value acc = a.pos.size() > 1 ? a.pos[1] : Value::integer(0);
  for (const Value& x : in.iterate(a.pos[0], loc)) acc = in.binary(ast::Op::Add, acc, x, loc);
  return acc;
}

Value b_abs(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "abs", 1, 1, loc);
  const Value& v = a.pos[0];
  if (v.is_tensorish()) return in.call_ltorch("abs", std::move(a), loc);
  if (v.is(VT::Float)) return Value::number(std::fabs(v.as_float()));
  if (v.is(VT::Int) || v.is(VT::Bool)) {
    int64_t x = v.is(VT::Int) ? v.as_int() : v.as_bool();
    if (x == std::numeric_limits<int64_t>::min()) in.fail(loc, "abs(" + std::to_string(x) + ") does not fit in 64 bits");
    return Value::integer(x < 0 ? -x : x);
  }
  in.fail(loc, std::string("bad operand type for abs(): '") + type_name(v.type()) + "'");
}

Value b_round(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "round", 1, 2, loc);
  const Value& v = a.pos[0];
  if (v.is_tensorish()) return in.call_ltorch("round", std::move(a), loc);
  if (!v.is_number()) in.fail(loc, "round() needs a number");
  if (a.pos.size() == 2 && !a.pos[1].is_none()) {
    double p = std::pow(10.0, static_cast<double>(want_int(in, a.pos[1], "round", 2, loc)));
    return Value::number(std::nearbyint(v.to_double() * p) / p);
  }
  if (!v.is(VT::Float)) return Value::integer(v.is(VT::Int) ? v.as_int() : v.as_bool());  // exact
  int64_t x = 0;
  std::string why = float_to_int(std::nearbyint(v.as_float()), &x);
  if (!why.empty()) in.fail(loc, why);
  return Value::integer(x);
}

Value b_getattr(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "getattr", 2, 3, loc);
  if (!a.pos[1].is(VT::Str)) in.fail(loc, "getattr(): attribute name must be a string");
  if (a.pos.size() == 3) {
    try {
      return in.get_attr(a.pos[0], a.pos[1].as<StrObj>()->s, loc);
    } catch (const ScriptError&) {
      return a.pos[2];
    }
  }
  return in.get_attr(a.pos[0], a.pos[1].as<StrObj>()->s, loc);
}

Value b_hasattr(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "hasattr", 2, 2, loc);
  if (!a.pos[1].is(VT::Str)) in.fail(loc, "hasattr(): attribute name must be a string");
  try {
    in.get_attr(a.pos[0], a.pos[1].as<StrObj>()->s, loc);
    return Value::boolean(true);
  } catch (const ScriptError&) {
    return Value::boolean(false);
  }
}

// namespace(name, **members): an object whose attributes are the members (Python's
// types.SimpleNamespace; stdlib/nvfuser.trace makes nvFuser's FusionDefinition with it).
Value b_namespace(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "namespace", 1, 1, loc);
  if (!a.pos[0].is(VT::Str)) in.fail(loc, "namespace(name, **members): the name must be a string");
  auto* n = new NamespaceObj(a.pos[0].as<StrObj>()->s);
  Value v(n);
  for (auto& [k, x] : a.kw) n->members[k] = x;
  return v;
}

// globals(): what a Thunder prologue reads from it, `globals()['__function_obj']` (the module
// whose parameters it unpacks), while tracer traces such a prologue; empty otherwise.
Value b_globals(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "globals", 0, 0, loc);
  auto* d = new DictObj();
  Value v(d);
  if (!in.function_obj().is_none()) d->set(str_value("__function_obj"), in.function_obj());
  return v;
}

Value b_type(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "type", 1, 1, loc);
  return str_value(type_name(a.pos[0].type()));
}

Value b_is_tensor(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "is_tensor", 1, 1, loc);
  return Value::boolean(a.pos[0].is_tensorish());
}

// torch.no_grad: as a decorator (@torch.no_grad or @torch.no_grad(), a printout's) it changes
// nothing; as a context manager while tracing, the block's statements form a 'no_grad' region,
// through which grad passes no cotangent (as PyTorch records no graph there).
Value b_no_grad(Interpreter& in, CallArgs& a, SourceLoc loc) {
  (void)loc;
  if (a.pos.size() == 1 && (a.pos[0].is(VT::Function) || a.pos[0].is(VT::Builtin))) return a.pos[0];
  return in.make_region("no_grad");
}

// torch.set_grad_enabled / torch.no_grad inside a model, as Thunder records them
// (ltorch._set_grad_enabled_with_warning(False) ... (True); torch._C._set_grad_enabled in an
// execution trace): while tracing, the statements between form a 'no_grad' region, as
// `with torch.no_grad():` makes.
Value b_set_grad_enabled(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "_set_grad_enabled", 1, 1, loc);
  if (!a.pos[0].is(VT::Bool)) in.fail(loc, std::string("_set_grad_enabled(enabled) takes a bool, got ") + type_name(a.pos[0].type()));
  in.set_grad_enabled(a.pos[0].as_bool(), loc);
  return Value();
}

Value b_checkpoint(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "checkpoint", 0, 0, loc);
  return in.make_region("checkpoint");
}

// Decorators and context managers from PyTorch and Thunder that change nothing here:
// used bare (@no_autocast) they return the function; called (@no_autocast()) they return
// themselves, to decorate next.
Value b_passthrough(Interpreter& in, CallArgs& a, SourceLoc loc) {
  (void)loc;
  if (a.pos.size() == 1 && (a.pos[0].is(VT::Function) || a.pos[0].is(VT::Builtin))) return a.pos[0];
  return *in.builtins().lookup("no_autocast");
}

// Thunder's backward printouts empty a collection once it is unpacked (clear_collection before
// May 2024, clear_mutable_collection since): while tracing, what it held and no name holds any
// more dies there (Interpreter::clear_collection; until then the collection keeps it alive).
Value b_clear_collection(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "clear_collection", 1, 1, loc);
  in.clear_collection(a.pos[0], loc);
  return Value();
}

// The job's world: dist.group() is ('world', N), the group every collective takes.
// dist.group(): the world; dist.group(ranks): those ranks, numbered in the group by their order
// there, ('ranks', N, (r0, ...)); all the job's ranks in order are the world.
Value b_dist_group(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "dist.group", 0, 1, loc);
  if (a.pos.empty() || a.pos[0].is(VT::None)) return in.world_group(nullptr);
  std::vector<Value> members = in.iterate(a.pos[0], loc);
  if (members.empty()) in.fail(loc, "dist.group(ranks): a group needs at least one rank");
  int64_t world = in.world_size() > 0 ? in.world_size() : 1;
  std::vector<int64_t> seen;
  for (const Value& r : members) {
    if (!r.is(VT::Int) || r.as_int() < 0) in.fail(loc, "dist.group(ranks): ranks are non-negative ints, got " + repr(r));
    if (r.as_int() >= world)
      in.fail(loc, "dist.group(ranks): rank " + std::to_string(r.as_int()) + " is not in a job of " + std::to_string(world) + " rank" + (world == 1 ? "" : "s"));
    if (std::find(seen.begin(), seen.end(), r.as_int()) != seen.end())
      in.fail(loc, "dist.group(ranks): rank " + std::to_string(r.as_int()) + " is named twice");
    seen.push_back(r.as_int());
  }
  bool whole = static_cast<int64_t>(seen.size()) == world;
  for (size_t i = 0; whole && i < seen.size(); ++i) whole = seen[i] == static_cast<int64_t>(i);
  if (whole) return in.world_group(nullptr);
  std::vector<Value> rs;
  for (int64_t r : seen) rs.push_back(Value::integer(r));
  return make<TupleObj>(std::vector<Value>{str_value("ranks"), Value::integer(static_cast<int64_t>(seen.size())), make<TupleObj>(std::move(rs))});
}

Value b_dist_world_size(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "dist.world_size", 0, 0, loc);
  return Value::integer(in.world_size() > 0 ? in.world_size() : 1);
}

Value b_dist_rank(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "dist.rank", 0, 0, loc);
  return Value::integer(in.world_rank());
}

const BuiltinDef kDistBuiltins[] = {
    {"group", b_dist_group, "dist.group(ranks=None): the job's process group, ('world', N) for its N ranks (1 outside a job); with ranks, a subgroup of them, ('ranks', N, (r0, ...)), whose collectives run among those ranks only (CPU tensors)."},
    {"new_group", b_dist_group, "dist.new_group(ranks): dist.group(ranks), torch.distributed's name."},
    {"world_size", b_dist_world_size, "dist.world_size(): the number of ranks in the job (1 outside a job)."},
    {"rank", b_dist_rank, "dist.rank(): this process's rank in the job (0 outside a job)."},
};

Value b_device(Interpreter& in, CallArgs& a, SourceLoc loc) {
  want_args(in, a, "device", 1, 1, loc);
  if (!a.pos[0].is(VT::Str)) in.fail(loc, "device() takes a string such as \"cpu\" or \"cuda:0\"");
  return a.pos[0];
}

Value b_trace(Interpreter& in, CallArgs& a, SourceLoc loc) {
  if (a.pos.empty() || !a.pos[0].is(VT::Function)) in.fail(loc, "trace() takes a function, then its input types");
  const FunctionObj& fn = *a.pos[0].as<FunctionObj>();
  std::map<std::string, ir::TensorType> given;
  const auto& params = *fn.info->params;
  for (size_t i = 1; i < a.pos.size(); ++i) {
    if (i - 1 >= params.size()) in.fail(loc, "trace(): more types than parameters");
    const Value& t = a.pos[i];
    if (t.is(VT::Type)) {
      given[params[i - 1].name] = t.as<TypeObj>()->type;
    } else if (t.is(VT::Str)) {
      std::string why;
      auto ty = ir::parse_type_string(t.as<StrObj>()->s, &why);
      if (!ty) in.fail(loc, why);
      given[params[i - 1].name] = *ty;
    } else {
      in.fail(loc, "trace(): input types are written like f32[2, 3]");
    }
  }
  return make<TraceObj>(in.trace(fn, given));
}

Value exception_ctor(Interpreter& in, CallArgs& a, SourceLoc loc, const char* kind) {
  std::string msg = kind;
  if (!a.pos.empty()) msg += ": " + to_str(a.pos[0]);
  (void)in;
  (void)loc;
  return str_value(msg);
}
Value b_value_error(Interpreter& in, CallArgs& a, SourceLoc l) { return exception_ctor(in, a, l, "ValueError"); }
Value b_type_error(Interpreter& in, CallArgs& a, SourceLoc l) { return exception_ctor(in, a, l, "TypeError"); }
Value b_runtime_error(Interpreter& in, CallArgs& a, SourceLoc l) { return exception_ctor(in, a, l, "RuntimeError"); }
Value b_key_error(Interpreter& in, CallArgs& a, SourceLoc l) { return exception_ctor(in, a, l, "KeyError"); }
Value b_not_implemented(Interpreter& in, CallArgs& a, SourceLoc l) {
  return exception_ctor(in, a, l, "NotImplementedError");
}

const BuiltinDef kBuiltins[] = {
    {"print", b_print, "print(*values, sep=' ', end='\\n'): writes values to the output."},
    {"len", b_len, "len(x): length of a sequence, dict, range, or first dimension of a tensor."},
    {"namedtuple", b_namedtuple, "namedtuple(typename, field_names): a constructor of tuples whose items are also fields (t.values); field_names as 'a b' or a list."},
    {"range", b_range, "range(stop) / range(start, stop[, step]): integers."},
    {"enumerate", b_enumerate, "enumerate(xs, start=0): list of (index, value) pairs."},
    {"zip", b_zip, "zip(*seqs): list of tuples, as long as the shortest sequence."},
    {"list", b_list, "list(xs): a new list."},
    {"tuple", b_tuple, "tuple(xs): a new tuple."},
    {"dict", b_dict, "dict(pairs or mapping, **kw): a new dict."},
    {"str", b_str, "str(x): text of a value."},
    {"repr", b_repr, "repr(x): printable representation."},
    {"format", b_format, "format(x, spec=''): x by Python's format-spec mini-language ('>8.3f', ',d', '#x')."},
    {"int", b_int, "int(x): integer from a number, a string or a one-element tensor's value."},
    {"float", b_float, "float(x): float from a number, a string ('inf', 'nan') or a one-element tensor's value (t.float() casts)."},
    {"memory_stats", b_memory_stats,
     "memory_stats(reset_peak=False, device=None): {'allocated': bytes, 'peak': bytes, 'device': name} of the tensors held on "
     "a device (the peak since the last reset): 'cpu', 'cuda' or 'cuda:N' (its device allocator); None: the device compiled "
     "functions run on by default (tracer run --device)."},
    {"synchronize", b_synchronize,
     "synchronize(device=None): waits until the device has finished every operation queued on it, as "
     "torch.cuda.synchronize(), for timing a loop; 'cpu', 'cuda', 'cuda:N', None: tracer run --device's."},
    {"load", builtin_load,
     "load(path, like=None): a tensor from a .npy file, or the tensors of a .safetensors file as a dict; like=params "
     "rebuilds that pytree, checking every name, dtype and shape (needs the host's --allow-read)."},
    {"save", builtin_save,
     "save(path, value): a tensor to .npy, a pytree of tensors and numbers to .safetensors (names 'layers.0.w'), or a string as text; "
     "written whole or not at all (needs the host's --allow-write)."},
    {"load_module", builtin_load_module,
     "load_module(path, **settings): the .trace file at path (beside the calling file) run as a module with its "
     "top-level settings replaced (as --set does); returns its names as a namespace."},
    {"tensor", b_tensor, "tensor(data, dtype=None, device=None): a tensor from a number or nested lists (f32 if any is a float, else i64, else b8), on the host or the device named ('cuda', 'cuda:N')."},
    {"jit", builtin_jit,
     "jit(f, passes=None, device=None, donate_argnums=(), cuda_graph=False): f compiled: a call traces f on its arguments' types "
     "(tensors, numbers, lists/tuples/dicts of them), runs the passes and runs the result; one program per signature. "
     "device: 'cpu', 'cuda' or 'cuda:N'; None: where the arguments are. cuda_graph: on a GPU, replayed as a CUDA graph "
     "from the second call (outputs valid until the next call)."},
    {"value_and_grad", builtin_value_and_grad,
     "value_and_grad(f, argnums=0, has_aux=False, passes=None, device=None, cuda_graph=False): like jit, with grad first: a call "
     "returns (f's value, the gradients of the loss for the arguments argnums names, shaped like them)."},
    {"bool", b_bool, "bool(x): truth value (of a tensor: of its one element)."},
    {"sorted", b_sorted, "sorted(xs, key=None, reverse=False): a sorted list."},
    {"reversed", b_reversed, "reversed(xs): a reversed list."},
    {"slice", b_slice, "slice(stop) or slice(start, stop, step=None): a slice, as a[start:stop:step] makes (None: from the end)."},
    {"any", b_any, "any(xs): whether any element is true."},
    {"all", b_all, "all(xs): whether every element is true."},
    {"max", b_max, "max(xs) / max(a, b, ...): largest; on tensors amax or elementwise maximum."},
    {"min", b_min, "min(xs) / min(a, b, ...): smallest; on tensors amin or elementwise minimum."},
    {"sum", b_sum, "sum(xs, start=0): sum of numbers; on a tensor, ltorch.sum."},
    {"abs", b_abs, "abs(x): absolute value of a number or tensor."},
    {"round", b_round, "round(x, ndigits=None): round half to even."},
    {"getattr", b_getattr, "getattr(obj, name[, default])."},
    {"hasattr", b_hasattr, "hasattr(obj, name)."},
    {"namespace", b_namespace, "namespace(name, **members): an object whose attributes are the members (types.SimpleNamespace)."},
    {"type", b_type, "type(x): the name of x's type."},
    {"globals", b_globals,
     "globals(): in a Thunder prologue, globals()['__function_obj'] is the module whose parameters and buffers it reads "
     "(obj.get_parameter('0.weight')): bound while tracer traces such a prologue, whose reads become its inputs; "
     "otherwise an empty dict."},
    {"is_tensor", b_is_tensor, "is_tensor(x): whether x is a tensor or a traced tensor (proxy)."},
    {"checkpoint", b_checkpoint,
     "checkpoint(): with checkpoint(): marks statements whose activations backward recomputes."},
    {"no_autocast", b_passthrough, "A decorator from Thunder printouts; has no effect."},
    {"_set_grad_enabled", b_set_grad_enabled,
     "_set_grad_enabled(enabled): Thunder's ltorch._set_grad_enabled_with_warning and torch._C._set_grad_enabled: "
     "while tracing, statements after False and before True form a 'no_grad' region (no gradient passes)."},
    {"no_grad", b_no_grad, "torch.no_grad(): as a decorator (PyTorch's and Thunder's printouts), no effect; as `with torch.no_grad():` while tracing, grad passes no gradient through the block's statements."},
    {"autocast", b_passthrough,
     "torch.autocast(device_type, ...): a decorator of Thunder's printouts (autocast turned off around the computation); "
     "has no effect: a printed trace's casts are explicit."},
    {"device", b_device, "device(\"cuda:0\"): a device name (a string)."},
    {"clear_collection", b_clear_collection,
     "clear_collection(c): from Thunder's backward printouts (the collection's values die at their dels); does nothing."},
    {"clear_mutable_collection", b_clear_collection,
     "clear_mutable_collection(c): Thunder's later name for clear_collection; does nothing."},
    {"trace", b_trace, "trace(fn, *types): records fn on proxies of the given types and returns the trace."},
    {"ValueError", b_value_error, "ValueError(msg): an error message for raise."},
    {"TypeError", b_type_error, "TypeError(msg): an error message for raise."},
    {"RuntimeError", b_runtime_error, "RuntimeError(msg): an error message for raise."},
    {"KeyError", b_key_error, "KeyError(msg): an error message for raise."},
    {"NotImplementedError", b_not_implemented, "NotImplementedError(msg): an error message for raise."},
};

}  // namespace

std::vector<const BuiltinDef*> builtin_defs() {
  std::vector<const BuiltinDef*> out;
  for (const BuiltinDef& d : kBuiltins) out.push_back(&d);
  for (const BuiltinDef* d : alias_builtin_defs()) out.push_back(d);
  return out;
}

std::vector<const BuiltinDef*> time_builtin_defs() {
  std::vector<const BuiltinDef*> out;
  for (const BuiltinDef& d : kTime) out.push_back(&d);
  return out;
}

std::vector<const BuiltinDef*> dist_builtin_defs() {
  std::vector<const BuiltinDef*> out;
  for (const BuiltinDef& d : kDistBuiltins) out.push_back(&d);
  return out;
}

rt::Shape tensor_shape(const Value& v) {
  return v.is(VT::Tensor) ? v.as<TensorObj>()->shape() : v.as<ProxyObj>()->p->type.shape;
}

rt::DType tensor_dtype(const Value& v) {
  return v.is(VT::Tensor) ? v.as<TensorObj>()->dtype() : v.as<ProxyObj>()->p->type.dtype;
}

std::string display(const Value& v) {
  if (v.is(VT::Tensor)) {
    const rt::Tensor& t = v.as<TensorObj>()->host();
    return t.defined() ? rt::summarize(t) : std::string("<donated tensor>");
  }
  return to_str(v);
}

}  // namespace tracer::interp
