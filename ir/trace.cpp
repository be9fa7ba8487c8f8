// Trace basics (types, names) and the printer that writes a trace as a Thunder-style program.
#include "ir/trace.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>

#include "ir/op.h"

namespace tracer::ir {

using K = Arg::Kind;

std::string TensorType::str() const {
  std::string d = dist == Dist::replicated ? " replicated"
                  : dist == Dist::sharded  ? " sharded(" + std::to_string(shard_dim) + ")"
                  : dist == Dist::per_rank ? " per-rank"
                                           : "";
  return (future ? "FUTURE " : "") + device + " " + rt::dtype_name(dtype) + rt::shape_str(shape) + d;
}

static std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::optional<TensorType> parse_type_string(const std::string& text, std::string* why) {
  std::string s = trim(text);
  TensorType t;
  if (s.rfind("FUTURE ", 0) == 0) {
    t.future = true;
    s = trim(s.substr(7));
  }
  // The distribution, after the shape.
  if (size_t close = s.rfind(']'); close != std::string::npos && close + 1 < s.size()) {
    std::string d = trim(s.substr(close + 1));
    if (d == "replicated") {
      t.dist = Dist::replicated;
    } else if (d == "per-rank") {
      t.dist = Dist::per_rank;
    } else if (d.rfind("sharded(", 0) == 0 && d.back() == ')') {
      char* end = nullptr;
      long v = std::strtol(d.c_str() + 8, &end, 10);
      if (end != d.c_str() + d.size() - 1 || v < 0) {
        if (why) *why = "bad shard dimension in type \"" + text + "\"";
        return std::nullopt;
      }
      t.dist = Dist::sharded;
      t.shard_dim = static_cast<int>(v);
    } else {
      if (why) *why = "unknown distribution '" + d + "' in type \"" + text + "\" (replicated, sharded(DIM) or per-rank)";
      return std::nullopt;
    }
    s = trim(s.substr(0, close + 1));
  }
  size_t bracket = s.find('[');
  if (bracket == std::string::npos || s.back() != ']') {
    if (why) *why = "expected a tensor type like \"cpu f32[2, 3]\", got \"" + text + "\"";
    return std::nullopt;
  }
  std::string head = trim(s.substr(0, bracket));
  size_t space = head.rfind(' ');
  std::string dt = space == std::string::npos ? head : head.substr(space + 1);
  t.device = space == std::string::npos ? "cpu" : trim(head.substr(0, space));
  auto d = rt::dtype_from_name(dt);
  if (!d) {
    if (why) *why = "unknown dtype '" + dt + "' in type \"" + text + "\"";
    return std::nullopt;
  }
  t.dtype = *d;
  std::string dims = s.substr(bracket + 1, s.size() - bracket - 2);
  size_t pos = 0;
  while (pos < dims.size()) {
    size_t comma = dims.find(',', pos);
    std::string part = trim(dims.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    pos = comma == std::string::npos ? dims.size() : comma + 1;
    if (part.empty()) {
      if (comma == std::string::npos) break;
      if (why) *why = "empty dimension in type \"" + text + "\"";
      return std::nullopt;
    }
    char* end = nullptr;
    long long v = std::strtoll(part.c_str(), &end, 10);
    if (*end != '\0' || v < 0) {
      if (why) *why = "bad dimension '" + part + "' in type \"" + text + "\"";
      return std::nullopt;
    }
    t.shape.push_back(v);
  }
  if (t.dist == Dist::sharded && static_cast<size_t>(t.shard_dim) >= t.shape.size()) {
    if (why) *why = "shard dimension " + std::to_string(t.shard_dim) + " is out of range for the shape in type \"" + text + "\"";
    return std::nullopt;
  }
  return t;
}

TensorType arg_type(const Arg& a) {
  if (a.kind == K::Proxy) return a.proxy->type;
  if (a.kind == K::Tensor) return {a.tensor.dtype(), a.tensor.shape(), "cpu"};
  throw OpError("expected a tensor");
}

const ProxyPtr& view_root(const ProxyPtr& p) {
  const ProxyPtr* r = &p;
  while ((*r)->view) r = &(*r)->view->source;
  return *r;
}

bool stale_alias(const ProxyPtr& p) {
  const ProxyPtr& r = view_root(p);
  if (!r->storage || r->storage->writes == 0) return false;
  return !p->view || p->view->seen < r->storage->writes;
}

void for_each_proxy(const Arg& a, const std::function<void(const ProxyPtr&)>& fn) {
  if (a.kind == K::Proxy) fn(a.proxy);
  for (const Arg& x : a.items) for_each_proxy(x, fn);
}

ProxyPtr Trace::new_proxy(TensorType type) {
  std::string name;
  do {
    name = "t" + std::to_string(next_name++);
  } while (names.count(name));
  names.insert(name);
  auto p = std::make_shared<Proxy>();
  p->name = std::move(name);
  p->type = std::move(type);
  return p;
}

bool Trace::try_rename(const ProxyPtr& p, const std::string& name) {
  if (!p->auto_named) return false;
  if (p->name == name) {  // the user's name is the one it has (t7 = ... in a printout)
    p->auto_named = false;
    return true;
  }
  if (names.count(name)) {
    if (p->user_name.empty()) p->user_name = name;
    return false;
  }
  // The generated name is free again; the counter never hands it out twice, and a printed
  // trace that uses it for a later value reads back the same.
  names.erase(p->name);
  names.insert(name);
  p->name = name;
  p->auto_named = false;
  return true;
}

// ---- printing ----

static std::string print_float(double d) {
  if (std::isnan(d)) return "float('nan')";
  if (std::isinf(d)) return d > 0 ? "float('inf')" : "-float('inf')";
  std::string s = fmt::format("{}", d);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string quote_str(const std::string& s) {
  // As Python's repr: single quotes, double ones when the text has a single quote and no double.
  const char q = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\'':
      case '"':
        if (c == static_cast<unsigned char>(q)) out += '\\';
        out += static_cast<char>(c);
        break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
        else out += static_cast<char>(c);
    }
  }
  return out + q;
}

std::string print_arg(const Arg& a) {
  switch (a.kind) {
    case K::None: return "None";
    case K::Bool: return a.b ? "True" : "False";
    case K::Int: return std::to_string(a.i);
    case K::Float: return print_float(a.f);
    case K::Str: return quote_str(a.s);
    case K::DType: return rt::dtype_name(a.dtype);
    case K::Proxy: return a.proxy->name;
    case K::Tensor: return "<tensor " + rt::shape_str(a.tensor.shape()) + ">";
    case K::Tuple:
    case K::List: {
      std::string s = a.kind == K::Tuple ? "(" : "[";
      for (size_t i = 0; i < a.items.size(); ++i) s += (i ? ", " : "") + print_arg(a.items[i]);
      if (a.kind == K::Tuple && a.items.size() == 1) s += ",";
      return s + (a.kind == K::Tuple ? ")" : "]");
    }
    case K::Dict: {
      std::string s = "{";
      for (size_t i = 0; i < a.items.size(); ++i) s += (i ? ", " : "") + quote_str(a.keys[i]) + ": " + print_arg(a.items[i]);
      return s + "}";
    }
  }
  return "None";
}

static bool same_arg(const Arg& x, const Arg& y) {
  if (x.kind != y.kind) return false;
  switch (x.kind) {
    case K::None: return true;
    case K::Bool: return x.b == y.b;
    case K::Int: return x.i == y.i;
    case K::Float: return x.f == y.f;
    case K::Str: return x.s == y.s;
    case K::DType: return x.dtype == y.dtype;
    case K::Proxy: return x.proxy == y.proxy;
    case K::Tensor: return x.tensor.data() == y.tensor.data();
    default:
      if (x.items.size() != y.items.size() || x.keys != y.keys) return false;
      for (size_t i = 0; i < x.items.size(); ++i)
        if (!same_arg(x.items[i], y.items[i])) return false;
      return true;
  }
}

static std::string print_call_args(const Stmt& s) {
  std::vector<std::string> parts;
  if (s.kind == StmtKind::Prim && s.op) {
    const auto& params = s.op->params;
    size_t last_pos = 0;  // positional params printed: up to the last one that differs from its default
    for (size_t i = 0; i < params.size() && i < s.args.size(); ++i)
      if (!params[i].kw_only && (params[i].required || !same_arg(s.args[i], params[i].default_value))) last_pos = i + 1;
    for (size_t i = 0; i < last_pos; ++i) parts.push_back(print_arg(s.args[i]));
    for (size_t i = 0; i < params.size() && i < s.args.size(); ++i)
      if (params[i].kw_only && (params[i].required || !same_arg(s.args[i], params[i].default_value)))
        parts.push_back(params[i].name + "=" + print_arg(s.args[i]));
  } else {
    for (const Arg& a : s.args) parts.push_back(print_arg(a));
    for (const auto& [k, v] : s.kwargs) parts.push_back(k + "=" + print_arg(v));
  }
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : "") + parts[i];
  return out;
}

std::string print_stmt_line(const Stmt& s) {
  if (s.kind == StmtKind::Del) {
    std::string out = "del ";
    for (size_t i = 0; i < s.deleted.size(); ++i) out += (i ? ", " : "") + s.deleted[i]->name;
    return out;
  }
  std::string lhs;
  for (size_t i = 0; i < s.outputs.size(); ++i) lhs += (i ? ", " : "") + s.outputs[i]->name;
  if (s.outputs_as_list) lhs = "[" + lhs + "]";
  std::string out = (lhs.empty() ? "" : lhs + " = ") + s.callee + "(" + print_call_args(s) + ")";
  if (s.outputs.size() == 1 && !s.outputs_as_list) {
    out += "  # " + s.outputs[0]->name + ": \"" + s.outputs[0]->type.str() + "\"";
  } else if (s.outputs.size() > 1 && !s.outputs_as_list) {
    // Several outputs (o, lse = prims.attention(...)): each one's type, in order.
    out += "  #";
    for (size_t i = 0; i < s.outputs.size(); ++i)
      out += std::string(i ? ", " : " ") + s.outputs[i]->name + ": \"" + s.outputs[i]->type.str() + "\"";
  }
  return out;
}

static void print_subsymbols(const Stmt& s, const std::string& indent, std::string& out) {
  for (const Stmt& sub : s.subsymbols) {
    out += indent + "# " + print_stmt_line(sub) + "\n";
    // Fusion members are read back as the fusion's body; deeper levels stay comments.
    print_subsymbols(sub, indent + "  ", out);
  }
}

static void print_block(const std::vector<Stmt>& stmts, std::string& out) {
  std::string open_region;
  int open_id = 0;
  for (const Stmt& s : stmts) {
    if (s.region != open_region || (!s.region.empty() && s.region_id != open_id)) {
      if (!s.region.empty()) out += "  with " + s.region + "():\n";
      open_region = s.region;
      open_id = s.region_id;
    }
    std::string indent = s.region.empty() ? "  " : "    ";
    if (!s.source.empty()) out += "\n" + indent + "# " + s.source + "\n";
    out += indent + print_stmt_line(s) + "\n";
    print_subsymbols(s, indent + "  ", out);
  }
}

std::string print_trace(const Trace& t) {
  std::string out;
  for (const std::string& p : t.provenance) out += "# " + p + "\n";
  out += "def " + t.name + "(";
  for (size_t i = 0; i < t.inputs.size(); ++i) out += (i ? ", " : "") + t.inputs[i]->name;
  out += "):\n";
  for (const ProxyPtr& p : t.inputs) out += "  # " + p->name + ": \"" + p->type.str() + "\"\n";
  print_block(t.stmts, out);
  out += "  return " + print_arg(t.output) + "\n";
  return out;
}

}  // namespace tracer::ir
