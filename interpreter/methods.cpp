// Attribute lookup: tensor properties and methods (ops of ltorch), methods of str, list and
// dict, members of namespaces; and the math namespace.
#include <algorithm>
#include <cmath>

#include "interpreter/format.h"
#include "interpreter/builtins.h"
#include "interpreter/compiled.h"
#include "interpreter/interp.h"
#include "interpreter/trace_api.h"

namespace tracer::interp {

namespace {

void nargs(Interpreter& in, const CallArgs& a, const char* name, size_t lo, size_t hi, SourceLoc loc) {
  // a.pos[0] is self.
  if (a.pos.size() - 1 < lo || a.pos.size() - 1 > hi)
    in.fail(loc, std::string(name) + "() takes " + std::to_string(lo) + (lo == hi ? "" : " to " + std::to_string(hi)) +
                     " arguments (" + std::to_string(a.pos.size() - 1) + " given)");
}

const std::string& want_str(Interpreter& in, const Value& v, const char* fn, SourceLoc loc) {
  if (!v.is(VT::Str)) in.fail(loc, std::string(fn) + "() expects a string, got " + type_name(v.type()));
  return v.as<StrObj>()->s;
}

// ---- str ----
Value s_join(Interpreter& in, CallArgs& a, SourceLoc loc) {
  nargs(in, a, "join", 1, 1, loc);
  std::string out;
  bool first = true;
  for (const Value& x : in.iterate(a.pos[1], loc)) {
    in.poll(loc);
    out += (first ? "" : a.pos[0].as<StrObj>()->s) + want_str(in, x, "join", loc);
    in.check_size(out.size(), 1, "a string", loc);
    first = false;
  }
  return str_value(out);
}

Value s_split(Interpreter& in, CallArgs& a, SourceLoc loc) {
  nargs(in, a, "split", 0, 1, loc);
  const std::string& s = a.pos[0].as<StrObj>()->s;
  std::vector<Value> out;
  if (a.pos.size() == 1 || a.pos[1].is_none()) {
    size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && isspace(static_cast<unsigned char>(s[i]))) ++i;
      size_t j = i;
      while (j < s.size() && !isspace(static_cast<unsigned char>(s[j]))) ++j;
      if (j > i) out.push_back(str_value(s.substr(i, j - i)));
      i = j;
    }
    return make<ListObj>(std::move(out));
  }
  const std::string& sep = want_str(in, a.pos[1], "split", loc);
  if (sep.empty()) in.fail(loc, "split(): empty separator");
  size_t start = 0, pos;
  while ((pos = s.find(sep, start)) != std::string::npos) {
    out.push_back(str_value(s.substr(start, pos - start)));
    start = pos + sep.size();
  }
  out.push_back(str_value(s.substr(start)));
  return make<ListObj>(std::move(out));
}

Value strip_impl(Interpreter& in, CallArgs& a, SourceLoc loc, bool left, bool right) {
  nargs(in, a, "strip", 0, 1, loc);
  const std::string& s = a.pos[0].as<StrObj>()->s;
  std::string chars = a.pos.size() > 1 ? want_str(in, a.pos[1], "strip", loc) : " \t\n\r";
  size_t b = left ? s.find_first_not_of(chars) : 0;
  if (b == std::string::npos) return str_value("");
  size_t e = right ? s.find_last_not_of(chars) : s.size() - 1;
  return str_value(s.substr(b, e - b + 1));
}
Value s_strip(Interpreter& in, CallArgs& a, SourceLoc l) { return strip_impl(in, a, l, true, true); }
Value s_lstrip(Interpreter& in, CallArgs& a, SourceLoc l) { return strip_impl(in, a, l, true, false); }
Value s_rstrip(Interpreter& in, CallArgs& a, SourceLoc l) { return strip_impl(in, a, l, false, true); }

Value s_startswith(Interpreter& in, CallArgs& a, SourceLoc loc) {
  nargs(in, a, "startswith", 1, 1, loc);
  return Value::boolean(a.pos[0].as<StrObj>()->s.rfind(want_str(in, a.pos[1], "startswith", loc), 0) == 0);
}

Value s_endswith(Interpreter& in, CallArgs& a, SourceLoc loc) {
  nargs(in, a, "endswith", 1, 1, loc);
  const std::string &s = a.pos[0].as<StrObj>()->s, &x = want_str(in, a.pos[1], "endswith", loc);
  return Value::boolean(s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0);
}

Value s_replace(Interpreter& in, CallArgs& a, SourceLoc loc) {
  nargs(in, a, "replace", 2, 2, loc);
  std::string s = a.pos[0].as<StrObj>()->s;
  const std::string &from = want_str(in, a.pos[1], "replace", loc), &to = want_str(in, a.pos[2], "replace", loc);
  if (from.empty()) return str_value(s);
  std::string out;
  size_t start = 0, pos;
  while ((pos = s.find(from, start)) != std::string::npos) {
    out += s.substr(start, pos - start) + to;
    start = pos + from.size();
  }
  return str_value(out + s.substr(start));
}

Value s_find(Interpreter& in, CallArgs& a, SourceLoc loc) {
  nargs(in, a, "find", 1, 1, loc);
  size_t p = a.pos[0].as<StrObj>()->s.find(want_str(in, a.pos[1], "find", loc));
  return Value::integer(p == std::string::npos ? -1 : static_cast<int64_t>(p));
}

Value case_impl(CallArgs& a, bool upper) {
  std::string s = a.pos[0].as<StrObj>()->s;
  for (char& c : s) c = static_cast<char>(upper ? toupper(static_cast<unsigned char>(c)) : tolower(static_cast<unsigned char>(c)));
  return str_value(s);
}
Value s_upper(Interpreter&, CallArgs& a, SourceLoc) { return case_impl(a, true); }
Value s_lower(Interpreter&, CallArgs& a, SourceLoc) { return case_impl(a, false); }

// "{}", "{0}", "{name}" replaced by str() of the arguments; "{{" and "}}" are braces.
Value s_format(Interpreter& in, CallArgs& a, SourceLoc loc) {
  // Python's str.format: {} {0} {name} fields, !r/!s/!a conversions, a format spec after ':'
  // (interpreter/format.h), with {} fields nested in the spec ("{:{w}.{p}f}").
  const std::string& f = a.pos[0].as<StrObj>()->s;
  size_t next = 1;
  bool automatic = false, manual = false;
  auto argument = [&](const std::string& field) -> const Value& {
    if (field.empty()) {
      if (manual) in.fail(loc, "format(): cannot switch from manual field specification to automatic field numbering");
      automatic = true;
      if (next >= a.pos.size()) in.fail(loc, "format(): Replacement index " + std::to_string(next - 1) + " out of range for positional args tuple");
      return a.pos[next++];
    }
    if (field.find_first_of(".[") != std::string::npos)
      in.fail(loc, "format(): attribute and index fields ('" + field + "') are not supported");
    if (std::isdigit(static_cast<unsigned char>(field[0]))) {
      if (automatic) in.fail(loc, "format(): cannot switch from automatic field numbering to manual field specification");
      manual = true;
      if (field.find_first_not_of("0123456789") != std::string::npos || field.size() > 9)
        in.fail(loc, "format(): bad field '" + field + "'");
      size_t k = std::stoul(field) + 1;
      if (k >= a.pos.size()) in.fail(loc, "format(): Replacement index " + field + " out of range for positional args tuple");
      return a.pos[k];
    }
    for (const auto& [k, x] : a.kw)
      if (k == field) return x;
    in.fail(loc, "format(): no argument named '" + field + "' (KeyError)");
  };
  auto render = [&](const std::string& field_text) {
    // field[!conv][:spec]
    size_t colon = field_text.find(':'), bang = field_text.find('!');
    if (bang != std::string::npos && colon != std::string::npos && bang > colon) bang = std::string::npos;
    std::string field = field_text.substr(0, std::min(colon, bang));
    std::string conv = bang == std::string::npos ? "" : field_text.substr(bang + 1, (colon == std::string::npos ? field_text.size() : colon) - bang - 1);
    std::string spec = colon == std::string::npos ? "" : field_text.substr(colon + 1);
    const Value& v = argument(field);
    // Nested fields in the spec.
    std::string s2;
    for (size_t j = 0; j < spec.size(); ++j) {
      if (spec[j] != '{') {
        s2 += spec[j];
        continue;
      }
      size_t e = spec.find('}', j);
      if (e == std::string::npos) in.fail(loc, "format(): unmatched '{' in format spec");
      s2 += to_str(argument(spec.substr(j + 1, e - j - 1)));
      j = e;
    }
    try {
      if (conv.empty()) return format_spec(v, s2);
      if (conv == "r" || conv == "a") return format_spec(str_value(repr(v)), s2);
      if (conv == "s") return format_spec(str_value(to_str(v)), s2);
    } catch (const std::invalid_argument& e) {
      in.fail(loc, std::string("format(): ") + e.what());
    }
    in.fail(loc, "format(): unknown conversion specifier '" + conv + "'");
  };
  std::string out;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] == '{' && i + 1 < f.size() && f[i + 1] == '{') { out += '{'; ++i; continue; }
    if (f[i] == '}' && i + 1 < f.size() && f[i + 1] == '}') { out += '}'; ++i; continue; }
    if (f[i] == '}') in.fail(loc, "format(): single '}' encountered in format string");
    if (f[i] != '{') { out += f[i]; continue; }
    // The field's end: the matching '}', past one level of nested fields in its spec.
    size_t j = i + 1;
    int depth = 1;
    for (; j < f.size() && depth > 0; ++j) {
      if (f[j] == '{') ++depth;
      else if (f[j] == '}') --depth;
    }
    if (depth != 0) in.fail(loc, "format(): expected '}' before end of string");
    out += render(f.substr(i + 1, j - i - 2));
    i = j - 1;
  }
  return str_value(out);
}

// ---- list ----
std::vector<Value>& items(const Value& v) { return v.as<ListObj>()->items; }

Value l_append(Interpreter& in, CallArgs& a, SourceLoc loc) {
  nargs(in, a, "append", 1, 1, loc);
  in.check_size(items(a.pos[0]).size() + 1, sizeof(Value), "a list", loc);
  items(a.pos[0]).push_back(a.pos[1]);
  return Value();
}

Value l_extend(Interpreter& in, CallArgs& a, SourceLoc loc) {
  nargs(in, a, "extend", 1, 1, loc);
  std::vector<Value> more = in.iterate(a.pos[1], loc);
  in.check_size(items(a.pos[0]).size() + more.size(), sizeof(Value), "a list", loc);
  items(a.pos[0]).insert(items(a.pos[0]).end(), more.begin(), more.end());
  return Value();
}

int64_t list_index(Interpreter& in, const Value& self, const Value& i, SourceLoc loc, bool insert) {
  if (!i.is(VT::Int)) in.fail(loc, "list indices must be integers");
  int64_t n = static_cast<int64_t>(items(self).size()), k = i.as_int() < 0 ? i.as_int() + n : i.as_int();
  if (insert) return std::max<int64_t>(0, std::min(k, n));
  if (k < 0 || k >= n) in.fail(loc, "list index out of range");
  return k;
}

Value l_pop(Interpreter& in, CallArgs& a, SourceLoc loc) {
  nargs(in, a, "pop", 0, 1, loc);
  if (items(a.pos[0]).empty()) in.fail(loc, "pop from empty list");
  int64_t k = a.pos.size() > 1 ? list_index(in, a.pos[0], a.pos[1], loc, false)
                               : static_cast<int64_t>(items(a.pos[0]).size()) - 1;
  Value v = items(a.pos[0])[k];
  items(a.pos[0]).erase(items(a.pos[0]).begin() + k);
  return v;
}

Value l_insert(Interpreter& in, CallArgs& a, SourceLoc loc) {
  nargs(in, a, "insert", 2, 2, loc);
  int64_t k = list_index(in, a.pos[0], a.pos[1], loc, true);
  in.check_size(items(a.pos[0]).size() + 1, sizeof(Value), "a list", loc);
  items(a.pos[0]).insert(items(a.pos[0]).begin() + k, a.pos[2]);
  return Value();
}

Value l_index(Interpreter& in, CallArgs& a, SourceLoc loc) {
  nargs(in, a, "index", 1, 1, loc);
  const auto& xs = a.pos[0].is(VT::List) ? items(a.pos[0]) : a.pos[0].as<TupleObj>()->items;
  for (size_t i = 0; i < xs.size(); ++i)
    if (values_equal(xs[i], a.pos[1])) return Value::integer(static_cast<int64_t>(i));
  in.fail(loc, repr(a.pos[1]) + " is not in list");
}

Value l_count(Interpreter& in, CallArgs& a, SourceLoc loc) {
  nargs(in, a, "count", 1, 1, loc);
  const auto& xs = a.pos[0].is(VT::List) ? items(a.pos[0]) : a.pos[0].as<TupleObj>()->items;
  return Value::integer(std::count_if(xs.begin(), xs.end(), [&](const Value& x) { return values_equal(x, a.pos[1]); }));
}

Value l_remove(Interpreter& in, CallArgs& a, SourceLoc loc) {
  nargs(in, a, "remove", 1, 1, loc);
  auto& xs = items(a.pos[0]);
  for (size_t i = 0; i < xs.size(); ++i)
    if (values_equal(xs[i], a.pos[1])) {
      xs.erase(xs.begin() + static_cast<std::ptrdiff_t>(i));
      return Value();
    }
  in.fail(loc, "list.remove(x): x not in list");
}

Value l_reverse(Interpreter&, CallArgs& a, SourceLoc) {
  std::reverse(items(a.pos[0]).begin(), items(a.pos[0]).end());
  return Value();
}

Value l_sort(Interpreter& in, CallArgs& a, SourceLoc loc) {
  CallArgs c;
  c.pos.push_back(a.pos[0]);
  c.kw = a.kw;
  Value sorted = in.call(*in.builtins().lookup("sorted"), std::move(c), loc);
  items(a.pos[0]) = items(sorted);
  return Value();
}

Value l_copy(Interpreter&, CallArgs& a, SourceLoc) {
  if (a.pos[0].is(VT::Dict)) {
    auto* d = new DictObj();
    Value v(d);
    for (auto& kv : a.pos[0].as<DictObj>()->items()) d->set(kv.first, kv.second);
    return v;
  }
  return make<ListObj>(items(a.pos[0]));
}

Value l_clear(Interpreter&, CallArgs& a, SourceLoc) {
  if (a.pos[0].is(VT::Dict)) {
    a.pos[0].as<DictObj>()->clear();
  } else {
    items(a.pos[0]).clear();
  }
  return Value();
}

// ---- dict ----
DictObj& dict(const Value& v) { return *v.as<DictObj>(); }

Value d_get(Interpreter& in, CallArgs& a, SourceLoc loc) {
  nargs(in, a, "get", 1, 2, loc);
  Value* v = dict(a.pos[0]).find(a.pos[1]);
  return v ? *v : a.pos.size() > 2 ? a.pos[2] : Value();
}

Value d_view(CallArgs& a, int which) {
  std::vector<Value> out;
  for (auto& [k, v] : dict(a.pos[0]).items())
    out.push_back(which == 0 ? k : which == 1 ? v : make<TupleObj>(std::vector<Value>{k, v}));
  return make<ListObj>(std::move(out));
}
Value d_keys(Interpreter&, CallArgs& a, SourceLoc) { return d_view(a, 0); }
Value d_values(Interpreter&, CallArgs& a, SourceLoc) { return d_view(a, 1); }
Value d_items(Interpreter&, CallArgs& a, SourceLoc) { return d_view(a, 2); }

Value d_pop(Interpreter& in, CallArgs& a, SourceLoc loc) {
  nargs(in, a, "pop", 1, 2, loc);
  Value* v = dict(a.pos[0]).find(a.pos[1]);
  if (!v) {
    if (a.pos.size() > 2) return a.pos[2];
    in.fail(loc, "key " + repr(a.pos[1]) + " not found");
  }
  Value out = *v;
  dict(a.pos[0]).erase(a.pos[1]);
  return out;
}

Value d_setdefault(Interpreter& in, CallArgs& a, SourceLoc loc) {
  nargs(in, a, "setdefault", 1, 2, loc);
  if (Value* v = dict(a.pos[0]).find(a.pos[1])) return *v;
  Value d = a.pos.size() > 2 ? a.pos[2] : Value();
  dict(a.pos[0]).set(a.pos[1], d);
  return d;
}

Value d_update(Interpreter& in, CallArgs& a, SourceLoc loc) {
  nargs(in, a, "update", 0, 1, loc);
  if (a.pos.size() > 1) {
    if (!a.pos[1].is(VT::Dict)) in.fail(loc, "update() expects a dict");
    for (auto& [k, v] : dict(a.pos[1]).items()) dict(a.pos[0]).set(k, v);
  }
  for (auto& [k, v] : a.kw) dict(a.pos[0]).set(str_value(k), v);
  return Value();
}

const BuiltinDef kStr[] = {
    {"join", s_join, "sep.join(xs)"}, {"split", s_split, "s.split(sep=None)"},
    {"strip", s_strip, "s.strip(chars=whitespace)"}, {"lstrip", s_lstrip, "s.lstrip(chars)"},
    {"rstrip", s_rstrip, "s.rstrip(chars)"}, {"startswith", s_startswith, "s.startswith(prefix)"},
    {"endswith", s_endswith, "s.endswith(suffix)"}, {"replace", s_replace, "s.replace(old, new)"},
    {"find", s_find, "s.find(sub): index or -1"}, {"upper", s_upper, "s.upper()"}, {"lower", s_lower, "s.lower()"},
    {"format", s_format, "s.format(*args, **kw): {} {0} {name} fields"},
};
const BuiltinDef kList[] = {
    {"append", l_append, "xs.append(x)"}, {"extend", l_extend, "xs.extend(ys)"}, {"pop", l_pop, "xs.pop(i=-1)"},
    {"insert", l_insert, "xs.insert(i, x)"}, {"index", l_index, "xs.index(x)"}, {"count", l_count, "xs.count(x)"},
    {"remove", l_remove, "xs.remove(x)"}, {"reverse", l_reverse, "xs.reverse()"},
    {"sort", l_sort, "xs.sort(key=None, reverse=False)"}, {"copy", l_copy, "xs.copy()"}, {"clear", l_clear, "xs.clear()"},
};
const BuiltinDef kTuple[] = {{"index", l_index, "t.index(x)"}, {"count", l_count, "t.count(x)"}};

// A tensor type with its distribution over the job's ranks (docs/distributed.md): f32[64, 64].sharded(0).
Value with_dist(Interpreter& in, CallArgs& a, SourceLoc loc, ir::Dist d, const char* name) {
  size_t want = d == ir::Dist::sharded ? 2 : 1;
  if (a.pos.size() != want || !a.kw.empty())
    in.fail(loc, std::string("type.") + name + (d == ir::Dist::sharded ? "(dim) takes one dimension" : "() takes no arguments"));
  ir::TensorType t = a.pos[0].as<TypeObj>()->type;
  t.dist = d;
  t.shard_dim = 0;
  if (d == ir::Dist::sharded) {
    if (!a.pos[1].is(VT::Int)) in.fail(loc, "type.sharded(dim): dim must be an integer");
    int64_t r = static_cast<int64_t>(t.shape.size()), v = a.pos[1].as_int();
    if (v < -r || v >= r) in.fail(loc, "type.sharded(" + std::to_string(v) + "): out of range for " + std::to_string(r) + " dimensions");
    t.shard_dim = static_cast<int>(v < 0 ? v + r : v);
  }
  return make<TypeObj>(std::move(t));
}
Value t_replicated(Interpreter& in, CallArgs& a, SourceLoc loc) { return with_dist(in, a, loc, ir::Dist::replicated, "replicated"); }
Value t_sharded(Interpreter& in, CallArgs& a, SourceLoc loc) { return with_dist(in, a, loc, ir::Dist::sharded, "sharded"); }
Value t_per_rank(Interpreter& in, CallArgs& a, SourceLoc loc) { return with_dist(in, a, loc, ir::Dist::per_rank, "per_rank"); }
const BuiltinDef kType[] = {
    {"replicated", t_replicated, "f32[4, 4].replicated(): the same on every rank of the job"},
    {"sharded", t_sharded, "f32[32, 64].sharded(dim): this rank's slice along dim of a tensor split over the ranks"},
    {"per_rank", t_per_rank, "f32[8, 64].per_rank(): different on each rank (a data-parallel batch)"},
};
// A concrete tensor's values as Python numbers (PyTorch's item() and tolist()).
Value element_value(const rt::Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case rt::DType::i64: return Value::integer(t.data_as<int64_t>()[i]);
    case rt::DType::b8: return Value::boolean(t.get(i) != 0);
    default: return rt::is_int(t.dtype()) ? Value::integer(static_cast<int64_t>(t.get(i))) : Value::number(t.get(i));
  }
}
const rt::Tensor& concrete(Interpreter& in, const Value& v, SourceLoc loc, const char* what) {
  if (v.is(VT::Proxy)) {
    std::string w = what, cast = w.rfind("float(", 0) == 0 ? "t.float()" : w.rfind("int(", 0) == 0 ? "t.long()" : "";
    in.fail(loc, w + " needs the tensor's value, which is not known while tracing (inside a traced or jit-compiled "
                     "function); return the tensor and read it after the call" +
                     (cast.empty() ? "" : " (" + cast + " casts a tensor without reading it)"));
  }
  const rt::Tensor& t = v.as<TensorObj>()->host();
  if (!t.defined())
    in.fail(loc, std::string(what) + ": the tensor was donated to a compiled call (donate_argnums) and holds no value any more");
  return t;
}
Value item_of(Interpreter& in, const Value& v, SourceLoc loc, const char* what) {
  const rt::Tensor& t = concrete(in, v, loc, what);
  if (t.numel() != 1)
    in.fail(loc, std::string(what) + ": only a one-element tensor can be converted to a Python number, this one has " +
                     std::to_string(t.numel()) + " elements (shape " + rt::shape_str(t.shape()) + ")");
  return element_value(t, 0);
}
Value tensor_item(Interpreter& in, CallArgs& a, SourceLoc loc) {
  if (a.pos.size() != 1 || !a.kw.empty()) in.fail(loc, "t.item() takes no arguments");
  return item_of(in, a.pos[0], loc, "item()");
}
Value nested_list(const rt::Tensor& t, size_t dim, int64_t* next) {
  if (dim == t.shape().size()) return element_value(t, (*next)++);
  std::vector<Value> xs;
  for (int64_t i = 0; i < t.shape()[dim]; ++i) xs.push_back(nested_list(t, dim + 1, next));
  return make<ListObj>(std::move(xs));
}
Value tensor_tolist(Interpreter& in, CallArgs& a, SourceLoc loc) {
  if (a.pos.size() != 1 || !a.kw.empty()) in.fail(loc, "t.tolist() takes no arguments");
  const rt::Tensor& t = concrete(in, a.pos[0], loc, "tolist()");
  int64_t next = 0;
  return nested_list(t, 0, &next);  // a 0-d tensor gives its number, as in PyTorch
}
// t on the device named (the same tensor when it is there already).
Value tensor_on(Interpreter& in, const Value& v, const std::string& device, SourceLoc loc) {
  if (v.is(VT::Proxy)) {
    if (device == v.as<ProxyObj>()->p->type.device || (device == "cuda" && v.as<ProxyObj>()->p->type.device.rfind("cuda", 0) == 0)) return v;
    in.fail(loc, "moving a tensor between devices while tracing: a trace runs on one device (jit(f, device=...) chooses it)");
  }
  TensorObj* t = v.as<TensorObj>();
  if (!t->holds_value())
    in.fail(loc, "the tensor was donated to a compiled call (donate_argnums) and holds no value any more");
  if (device == "cpu") return t->on_device() ? make<TensorObj>(concrete(in, v, loc, "cpu()")) : v;
  DeviceBackend* b = in.device_backend(device, loc);
  if (t->on_device() && t->backend == b) return v;
  return make<TensorObj>(b->upload(concrete(in, v, loc, "cuda()")), b);
}
Value tensor_cpu(Interpreter& in, CallArgs& a, SourceLoc loc) {
  if (a.pos.size() != 1 || !a.kw.empty()) in.fail(loc, "t.cpu() takes no arguments");
  return tensor_on(in, a.pos[0], "cpu", loc);
}
Value tensor_cuda(Interpreter& in, CallArgs& a, SourceLoc loc) {
  if (a.pos.size() > 2 || !a.kw.empty()) in.fail(loc, "t.cuda(index=None) takes at most the device's index");
  std::string device = "cuda";
  if (a.pos.size() == 2) {
    if (!a.pos[1].is(VT::Int)) in.fail(loc, "t.cuda(index): index must be an int");
    device += ":" + std::to_string(a.pos[1].as_int());
  }
  return tensor_on(in, a.pos[0], device, loc);
}
// t.to("cuda") moves; anything else (t.to(bf16), ...) is ltorch's to, the cast.
Value tensor_to(Interpreter& in, CallArgs& a, SourceLoc loc) {
  if (a.pos.size() == 2 && a.kw.empty() && a.pos[1].is(VT::Str)) return tensor_on(in, a.pos[0], a.pos[1].as<StrObj>()->s, loc);
  if (a.pos.size() == 1 && a.kw.size() == 1 && a.kw[0].first == "device" && a.kw[0].second.is(VT::Str))
    return tensor_on(in, a.pos[0], a.kw[0].second.as<StrObj>()->s, loc);
  return in.call_ltorch("to", std::move(a), loc);
}

const BuiltinDef kTensor[] = {
    {"cpu", tensor_cpu, "t.cpu(): t on the host (a copy of a device tensor's values)"},
    {"cuda", tensor_cuda, "t.cuda(index=None): t on the GPU (needs a host with a GPU backend: tracer's CLI and Session API)"},
    {"to", tensor_to, "t.to(device): t on 'cpu', 'cuda' or 'cuda:N'; t.to(dtype) casts"},
    {"item", tensor_item, "t.item(): the value of a one-element tensor as a Python number (not while tracing)"},
    {"tolist", tensor_tolist, "t.tolist(): the values as nested lists of Python numbers (not while tracing)"},
};

const BuiltinDef kDict[] = {
    {"get", d_get, "d.get(k, default=None)"}, {"keys", d_keys, "d.keys(): list of keys"},
    {"values", d_values, "d.values(): list of values"}, {"items", d_items, "d.items(): list of (key, value)"},
    {"pop", d_pop, "d.pop(k[, default])"}, {"setdefault", d_setdefault, "d.setdefault(k, default=None)"},
    {"update", d_update, "d.update(other, **kw)"}, {"copy", l_copy, "d.copy()"}, {"clear", l_clear, "d.clear()"},
};

template <size_t N>
const BuiltinDef* find_in(const BuiltinDef (&table)[N], const std::string& name) {
  for (const BuiltinDef& d : table)
    if (name == d.name) return &d;
  return nullptr;
}

}  // namespace

Value tensor_item(Interpreter& in, const Value& v, SourceLoc loc, const char* what) { return item_of(in, v, loc, what); }

const BuiltinDef* find_method(VT t, const std::string& name) {
  switch (t) {
    case VT::Str: return find_in(kStr, name);
    case VT::List: return find_in(kList, name);
    case VT::Tuple: return find_in(kTuple, name);
    case VT::Dict: return find_in(kDict, name);
    case VT::Type: return find_in(kType, name);
    case VT::Tensor:
    case VT::Proxy: return find_in(kTensor, name);
    default: return nullptr;
  }
}

namespace {

// ---- math ----
template <double (*F)(double)>
Value m_unary(Interpreter& in, CallArgs& a, SourceLoc loc) {
  if (a.pos.size() != 1 || !a.pos[0].is_number()) in.fail(loc, "math functions take one number");
  return Value::number(F(a.pos[0].to_double()));
}
double d_sqrt(double x) { return std::sqrt(x); }
double d_exp(double x) { return std::exp(x); }
double d_log(double x) { return std::log(x); }
double d_tanh(double x) { return std::tanh(x); }
double d_erf(double x) { return std::erf(x); }
double d_sin(double x) { return std::sin(x); }
double d_cos(double x) { return std::cos(x); }
// floor and ceil: integers as they are; a float's to the 64-bit integer it rounds to, or an error.
Value rounded(Interpreter& in, CallArgs& a, SourceLoc loc, const char* name, double (*f)(double)) {
  if (a.pos.size() != 1 || !a.pos[0].is_number()) in.fail(loc, std::string(name) + "() takes one number");
  const Value& v = a.pos[0];
  if (!v.is(VT::Float)) return Value::integer(v.is(VT::Int) ? v.as_int() : v.as_bool());
  int64_t x = 0;
  std::string why = float_to_int(f(v.as_float()), &x);
  if (!why.empty()) in.fail(loc, why);
  return Value::integer(x);
}
Value m_floor(Interpreter& in, CallArgs& a, SourceLoc loc) { return rounded(in, a, loc, "floor", [](double x) { return std::floor(x); }); }
Value m_ceil(Interpreter& in, CallArgs& a, SourceLoc loc) { return rounded(in, a, loc, "ceil", [](double x) { return std::ceil(x); }); }
Value m_isnan(Interpreter& in, CallArgs& a, SourceLoc loc) {
  if (a.pos.size() != 1 || !a.pos[0].is_number()) in.fail(loc, "isnan() takes one number");
  return Value::boolean(std::isnan(a.pos[0].to_double()));
}
Value m_copysign(Interpreter& in, CallArgs& a, SourceLoc loc) {
  if (a.pos.size() != 2 || !a.pos[0].is_number() || !a.pos[1].is_number()) in.fail(loc, "copysign() takes two numbers");
  return Value::number(std::copysign(a.pos[0].to_double(), a.pos[1].to_double()));
}
const BuiltinDef kMath[] = {
    {"sqrt", m_unary<d_sqrt>, "math.sqrt(x)"}, {"exp", m_unary<d_exp>, "math.exp(x)"},
    {"log", m_unary<d_log>, "math.log(x)"}, {"tanh", m_unary<d_tanh>, "math.tanh(x)"},
    {"erf", m_unary<d_erf>, "math.erf(x)"}, {"sin", m_unary<d_sin>, "math.sin(x)"},
    {"cos", m_unary<d_cos>, "math.cos(x)"}, {"floor", m_floor, "math.floor(x): an int"},
    {"ceil", m_ceil, "math.ceil(x): an int"}, {"isnan", m_isnan, "math.isnan(x)"},
    {"copysign", m_copysign, "math.copysign(x, y): |x| with the sign of y (a float)"},
};

Value shape_tuple(const rt::Shape& s) {
  std::vector<Value> v;
  for (int64_t x : s) v.push_back(Value::integer(x));
  return make<TupleObj>(std::move(v));
}

}  // namespace

Value math_namespace() {
  auto* ns = new NamespaceObj("math");
  Value v(ns);
  for (const BuiltinDef& d : kMath) ns->members[d.name] = make<BuiltinObj>(&d);
  ns->members["pi"] = Value::number(M_PI);
  ns->members["e"] = Value::number(M_E);
  ns->members["inf"] = Value::number(INFINITY);
  ns->members["nan"] = Value::number(NAN);
  return v;
}

std::vector<std::pair<const char*, const BuiltinDef*>> method_defs() {
  std::vector<std::pair<const char*, const BuiltinDef*>> out;
  for (const BuiltinDef& d : kStr) out.emplace_back("str", &d);
  for (const BuiltinDef& d : kList) out.emplace_back("list", &d);
  for (const BuiltinDef& d : kDict) out.emplace_back("dict", &d);
  return out;
}

Value Interpreter::get_attr(const Value& obj, const std::string& name, SourceLoc loc) {
  Value attr;
  if (trace_attr(*this, obj, name, &attr)) return attr;
  if (obj.is_obj() && name.compare(0, 2, "__") != 0 && overload_packets_.count(obj.obj())) {
    // torch.ops.aten.X.<overload>: X, whose arguments cover every overload. The out= overloads
    // write into a tensor given to them; tracer's ops return new ones.
    if (name == "out" || name == "grad_input" || (name.size() > 4 && name.compare(name.size() - 4, 4, "_out") == 0) || name.compare(0, 4, "out_") == 0)
      fail(loc, "ATen's '" + name + "' overloads write into a tensor given as out=; tracer's ops return a new tensor: "
                "call the op without the overload name (torch.ops.aten.X(...)) and use what it returns");
    return obj;
  }
  if (obj.is(VT::Trace))
    if (const BuiltinDef* m = trace_method(name)) return make<BoundMethodObj>(obj, make<BuiltinObj>(m));
  switch (obj.type()) {
    case VT::Namespace: {
      const NamespaceObj* ns = obj.as<NamespaceObj>();
      if (const Value* v = ns->lookup(name)) {
        if (ns->overload_packets && (v->is(VT::Function) || v->is(VT::Builtin) || v->is(VT::Op)))
          overload_packets_.insert(v->obj());
        return *v;
      }
      fail(loc, "module '" + obj.as<NamespaceObj>()->name + "' has no attribute '" + name + "'");
    }
    case VT::Tensor:
    case VT::Proxy: {
      if (obj.is(VT::Tensor) && !obj.as<TensorObj>()->holds_value())
        fail(loc, "'." + name + "' of a tensor that was donated to a compiled call (donate_argnums): it holds no value any "
                  "more; use what that call returned");
      if (name == "shape") return shape_tuple(tensor_shape(obj));
      if (name == "dtype") return Value::dtype(tensor_dtype(obj));
      if (name == "ndim") return Value::integer(static_cast<int64_t>(tensor_shape(obj).size()));
      if (name == "device") return str_value(obj.is(VT::Proxy) ? obj.as<ProxyObj>()->p->type.device : obj.as<TensorObj>()->device());
      if (name == "name" && obj.is(VT::Proxy)) return str_value(obj.as<ProxyObj>()->p->name);
      if (auto p = tensor_properties_.find(name); p != tensor_properties_.end()) return call(p->second, CallArgs{{obj}, {}}, loc);
      if (const BuiltinDef* m = find_method(obj.type(), name)) return make<BoundMethodObj>(obj, make<BuiltinObj>(m));
      if (const Value* f = ltorch_.as<NamespaceObj>()->lookup(name)) return make<BoundMethodObj>(obj, *f);
      fail(loc, "tensor has no attribute or method '" + name + "'");
    }
    case VT::DType:
      if (name == "itemsize") return Value::integer(static_cast<int64_t>(rt::dtype_size(obj.as_dtype())));
      if (name == "is_floating_point") return Value::boolean(rt::is_float(obj.as_dtype()));
      break;
    case VT::Type:
      if (name == "shape") return shape_tuple(obj.as<TypeObj>()->type.shape);
      if (name == "dtype") return Value::dtype(obj.as<TypeObj>()->type.dtype);
      if (const BuiltinDef* m = find_method(obj.type(), name)) return make<BoundMethodObj>(obj, make<BuiltinObj>(m));
      break;
    case VT::Function:
      if (name == "__name__") return str_value(obj.as<FunctionObj>()->info->name);
      break;
    case VT::Compiled:
      if (compiled_attr(*obj.as<CompiledObj>(), name, &attr)) return attr;
      break;
    case VT::Tuple: {
      const TupleObj* t = obj.as<TupleObj>();
      if (t->names) {
        for (size_t i = 0; i < t->names->fields.size(); ++i)
          if (t->names->fields[i] == name) return t->items[i];
        if (name == "_fields") {
          std::vector<Value> f;
          for (const std::string& n : t->names->fields) f.push_back(str_value(n));
          return make<TupleObj>(std::move(f));
        }
        std::string fields;
        for (const std::string& f : t->names->fields) fields += (fields.empty() ? "" : ", ") + f;
        fail(loc, "'" + t->names->type + "' has no field '" + name + "' (its fields: " + fields + ")");
      }
      if (const BuiltinDef* m = find_method(obj.type(), name)) return make<BoundMethodObj>(obj, make<BuiltinObj>(m));
      break;
    }
    case VT::Slice: {
      auto* s = obj.as<SliceObj>();
      if (name == "start") return s->lower;
      if (name == "stop") return s->upper;
      if (name == "step") return s->step;
      break;
    }
    default:
      if (const BuiltinDef* m = find_method(obj.type(), name)) return make<BoundMethodObj>(obj, make<BuiltinObj>(m));
      break;
  }
  fail(loc, std::string("'") + type_name(obj.type()) + "' object has no attribute '" + name + "'");
}

}  // namespace tracer::interp
