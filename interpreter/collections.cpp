// Thunder's collection parameters (collections.h): the structure from the body's unpackings, the
// element types from type comments or from the forward trace that saved them.
#include "interpreter/collections.h"

#include <algorithm>
#include <cstdlib>
#include <set>

#include "interpreter/interp.h"
#include "runtime/dtype.h"

namespace tracer::interp {

std::optional<Value> literal_of_type_string(const std::string& ts) {
  std::string head = ts.substr(0, ts.find(' '));
  std::string v = ts.size() > head.size() ? ts.substr(head.size() + 1) : "";
  char* end = nullptr;
  if (ts == "None") return Value();
  if (head == "str") return str_value(v);
  if (head == "bool" && (v == "True" || v == "False")) return Value::boolean(v == "True");
  if (head == "int" && !v.empty()) {
    long long x = std::strtoll(v.c_str(), &end, 10);
    if (*end == '\0') return Value::integer(x);
  }
  if (head == "float" && !v.empty()) {
    double x = std::strtod(v.c_str(), &end);
    if (*end == '\0') return Value::number(x);
  }
  return std::nullopt;
}

namespace {

using ast::ExprKind;

bool is_seq(const ast::Expr* e) { return e && (e->kind == ExprKind::Tuple || e->kind == ExprKind::List); }

// `targets = name` (one target list, not chained), anywhere in the block.
const ast::Stmt* find_unpack(const ast::Block& b, const std::string& name) {
  for (const auto& s : b) {
    if (s->is_assign() && s->targets.size() == 1 && is_seq(s->targets[0].get()) && s->value &&
        s->value->kind == ExprKind::Name && s->value->name == name)
      return s.get();
    if (const ast::Stmt* r = find_unpack(s->body, name)) return r;
    if (const ast::Stmt* r = find_unpack(s->orelse, name)) return r;
  }
  return nullptr;
}

// `# C1 (empty sequence)` (or tuple, list): Thunder's printout of unpacking an empty collection.
bool empty_unpack(const ast::Block& b, const std::string& name) {
  for (const auto& s : b) {
    for (const std::string& c : s->comments)
      for (const char* kind : {" (empty sequence)", " (empty tuple)", " (empty list)"})
        if (c == name + kind) return true;
    if (empty_unpack(s->body, name) || empty_unpack(s->orelse, name)) return true;
  }
  return false;
}

// The type string a printout gives `name`: a comment on a line of its own or after the
// statement that binds it.
const std::string* find_type(const ast::Block& b, const std::string& name) {
  for (const auto& s : b) {
    if (s->kind == ast::StmtKind::TypeComment && s->name == name) return &s->type_string;
    for (const ast::TypeComment& tc : s->type_comments)
      if (tc.name == name) return &tc.type_string;
    if (const std::string* r = find_type(s->body, name)) return r;
    if (const std::string* r = find_type(s->orelse, name)) return r;
  }
  return nullptr;
}

// The last top-level `return` of a block.
const ast::Stmt* last_return(const ast::Block& b) {
  const ast::Stmt* r = nullptr;
  for (const auto& s : b)
    if (s->kind == ast::StmtKind::Return && s->value) r = s.get();
  return r;
}

const ast::Expr* dict_item(const ast::Expr* d, const std::string& key) {
  if (!d || d->kind != ExprKind::Dict) return nullptr;
  for (size_t i = 0; i < d->keys.size(); ++i)
    if (d->keys[i] && d->keys[i]->kind == ExprKind::Str && d->keys[i]->str_value == key) return d->items[i].get();
  return nullptr;
}

// A forward trace: `return {'output': ..., 'flat_output': (...), ...}, (saved...)` or, in older
// printouts, `return output, (saved...)` from a function named augmented_forward_fn.
struct Forward {
  const ast::Stmt* def = nullptr;
  const ast::Expr* saved = nullptr;
  const ast::Expr* outputs = nullptr;  // what the cotangents are for
};

std::optional<Forward> as_forward(const ast::Stmt& def) {
  const ast::Stmt* ret = last_return(def.body);
  if (!ret || ret->value->kind != ExprKind::Tuple || ret->value->items.size() != 2) return std::nullopt;
  const ast::Expr* out = ret->value->items[0].get();
  Forward f{&def, ret->value->items[1].get(), nullptr};
  if (const ast::Expr* flat = dict_item(out, "flat_output")) {
    f.outputs = flat;
  } else if (out->kind == ExprKind::Dict) {
    f.outputs = dict_item(out, "output");
  } else if (def.name == "augmented_forward_fn") {
    f.outputs = out;
  } else {
    return std::nullopt;
  }
  return f;
}

// The forward trace of the file that holds `backward`: the nearest one before it, else after it.
std::optional<Forward> find_forward(const Module& m, const FuncInfo& backward) {
  if (!m.ast) return std::nullopt;
  std::optional<Forward> before, after;
  bool seen = false;
  for (const auto& s : m.ast->body) {
    if (s->kind != ast::StmtKind::FunctionDef) continue;
    if (&s->body == backward.body) {
      seen = true;
      continue;
    }
    auto f = as_forward(*s);
    if (!f) continue;
    if (!seen) before = f;
    else if (!after) after = f;
  }
  return before ? before : after;
}

// An input's first use: the first `x = f(...)` of the body that passes it as an argument, and at
// which place (null where none does).
const ast::Stmt* first_call_use(const ast::Block& body, const std::string& name, size_t* at) {
  for (const auto& st : body) {
    if (!st->is_assign() || !st->value || st->value->kind != ExprKind::Call) continue;
    const ast::Expr& call = *st->value;
    for (size_t i = 0; i < call.args.size(); ++i)
      if (call.args[i]->kind == ExprKind::Name && call.args[i]->name == name) {
        *at = i;
        return st.get();
      }
  }
  return nullptr;
}

std::string callee_name(const ast::Expr& call) {
  const ast::Expr& f = *call.items[0];
  return f.kind == ExprKind::Attribute || f.kind == ExprKind::Name ? f.name : "";
}

// The type of an input no comment states, from its first use where that use's printed output
// type determines it (docs/thunder.md, "Functions and their inputs"): the weight and bias of
// linear(x, w, b), the input of unsqueeze(x, d) or permute(x, dims), the indices of
// embedding(idx, w) (i64). Elsewhere (a table an embedding or a slice reads: its size is not
// printed) nothing is inferred and the input needs a type.
std::optional<ir::TensorType> infer_from_use(const ast::Block& body, const std::string& name) {
  auto type_of = [&](const std::string& n) -> std::optional<ir::TensorType> {
    const std::string* ts = find_type(body, n);
    if (!ts) return std::nullopt;
    std::string why;
    return ir::parse_type_string(*ts, &why);
  };
  auto ints = [](const ast::Expr* e, std::vector<int64_t>* out) {
    if (!e || (e->kind != ExprKind::Tuple && e->kind != ExprKind::List)) return false;
    for (const auto& x : e->items) {
      if (x->kind == ExprKind::Int) out->push_back(x->int_value);
      else if (x->kind == ExprKind::Unary && x->op == ast::Op::Neg && x->items[0]->kind == ExprKind::Int)
        out->push_back(-x->items[0]->int_value);
      else return false;
    }
    return true;
  };
  size_t at = 0;
  const ast::Stmt* st = first_call_use(body, name, &at);
  if (!st || st->targets.size() != 1 || st->targets[0]->kind != ExprKind::Name) return std::nullopt;
  const ast::Expr& call = *st->value;
  auto out = type_of(st->targets[0]->name);
  const std::string op = callee_name(call);
  if (!out || out->shape.empty()) return std::nullopt;
  ir::TensorType t = *out;
  const int64_t r = static_cast<int64_t>(out->shape.size());
  if (op == "linear" && call.args.size() >= 2) {
    auto x = call.args[0]->kind == ExprKind::Name ? type_of(call.args[0]->name) : std::nullopt;
    if (at == 1 && x && !x->shape.empty()) {
      t.shape = {out->shape.back(), x->shape.back()};
      return t;
    }
    if (at == 2) {
      t.shape = {out->shape.back()};
      return t;
    }
    return std::nullopt;
  }
  if (op == "unsqueeze" && at == 0 && call.args.size() == 2 && call.args[1]->kind == ExprKind::Int) {
    int64_t d = call.args[1]->int_value < 0 ? call.args[1]->int_value + r : call.args[1]->int_value;
    if (d < 0 || d >= r || out->shape[d] != 1) return std::nullopt;
    t.shape.erase(t.shape.begin() + d);
    return t;
  }
  if (op == "permute" && at == 0 && call.args.size() == 2) {
    std::vector<int64_t> dims;
    if (!ints(call.args[1].get(), &dims) || static_cast<int64_t>(dims.size()) != r) return std::nullopt;
    for (int64_t i = 0; i < r; ++i) {
      int64_t d = dims[i] < 0 ? dims[i] + r : dims[i];
      if (d < 0 || d >= r) return std::nullopt;
      t.shape[d] = out->shape[i];
    }
    return t;
  }
  if (op == "embedding" && at == 0) {
    t.shape.pop_back();
    t.dtype = rt::DType::i64;
    return t;
  }
  return std::nullopt;
}

// Where an input is first read, for an error that says why its type could not be inferred.
std::string first_use(Interpreter& in, const ast::Block& body, const std::string& name) {
  size_t at = 0;
  const ast::Stmt* st = first_call_use(body, name, &at);
  if (!st) return "";
  std::string op = callee_name(*st->value);
  std::string what = op == "embedding" && at == 1 ? "an embedding's table (its rows are not printed)"
                     : op.find("slice") != std::string::npos ? "only sliced (its whole size is not printed)"
                                                             : "argument " + std::to_string(at + 1) + " of " + (op.empty() ? "a call" : op);
  return what + ", line " + std::to_string(in.sources().line_col(st->loc).line);
}

class Builder {
 public:
  Builder(Interpreter& in, const FunctionObj& fn, const std::map<std::string, ir::TensorType>& given,
          std::optional<Forward> fw, std::vector<UntypedElement>* untyped)
      : in_(in), fn_(fn), given_(given), fw_(fw), untyped_(untyped) {}

  // The element unpacked into target `t`; `from` is what the forward put in its place (or null).
  Collection node(const ast::Expr* t, const ast::Expr* from, const std::string& coll) {
    Collection c;
    if (t->kind == ExprKind::Starred)
      in_.fail(t->loc, "a starred target cannot unpack the collection '" + coll + "': give each element a name");
    if (is_seq(t)) return tuple(t, from, coll);
    if (t->kind != ExprKind::Name) in_.fail(t->loc, "a collection's elements are unpacked into names or tuples of names");
    if (t->name == "_") return c;  // unused: None
    if (const ast::Stmt* inner = find_unpack(*fn_.info->body, t->name)) {
      const ast::Expr* f = from;
      if (f && f->kind == ExprKind::Name && fw_) f = nullptr;  // the forward saved a name; its structure is not stated
      return tuple(inner->targets[0].get(), f, t->name);
    }
    if (empty_unpack(*fn_.info->body, t->name)) {
      c.kind = Collection::Kind::Tuple;  // `# C1 (empty sequence)`: Thunder's unpacking of nothing
      return c;
    }
    c.name = t->name;
    if (auto g = given_.find(t->name); g != given_.end()) {
      c.kind = Collection::Kind::Tensor;
      c.type = g->second;
      return c;
    }
    if (const std::string* ts = find_type(*fn_.info->body, t->name)) {
      if (*ts == "Collection")
        in_.fail(t->loc, "'" + t->name + "' is a collection (its type comment says so) but is never unpacked");
      typed(&c, *ts, t->loc, "its type comment");
      return c;
    }
    if (from && fw_) {
      switch (from->kind) {
        case ExprKind::None: return c;
        case ExprKind::Int: c.kind = Collection::Kind::Number; c.number = Value::integer(from->int_value); return c;
        case ExprKind::Float: c.kind = Collection::Kind::Number; c.number = Value::number(from->float_value); return c;
        case ExprKind::True:
        case ExprKind::False:
          c.kind = Collection::Kind::Number;
          c.number = Value::boolean(from->kind == ExprKind::True);
          return c;
        case ExprKind::Name:
          if (const std::string* ts = find_type(fw_->def->body, from->name)) {
            typed(&c, *ts, from->loc, "the type comment of '" + from->name + "' in '" + fw_->def->name + "'");
            return c;
          }
          break;
        default: break;
      }
    }
    if (auto inferred = infer_from_use(*fn_.info->body, t->name)) {
      c.kind = Collection::Kind::Tensor;
      c.type = *inferred;
      return c;
    }
    // Untyped: recorded, so that one error names every such element of the function.
    // (a backward_fn(saved_for_backward, cotangents): two plain collections; a forward's *args is one)
    bool backward = fn_.info->params->size() == 2 && (*fn_.info->params)[0].kind == ast::Param::Kind::Normal;
    untyped_->push_back({t->loc, t->name, coll, fw_ ? fw_->def->name : "", backward, first_use(in_, *fn_.info->body, t->name)});
    c.kind = Collection::Kind::Tensor;
    return c;
  }

  void typed_from(Collection* c, const std::string& ts, SourceLoc loc, const std::string& where) { typed(c, ts, loc, where); }

 private:
  Collection tuple(const ast::Expr* t, const ast::Expr* from, const std::string& coll) {
    Collection c;
    c.kind = Collection::Kind::Tuple;
    const auto& ts = t->items;
    // A single name unpacked from a forward's single value (`t0, = cotangents` for `return t11, ...`).
    if (from && !is_seq(from) && ts.size() == 1) {
      c.items.push_back(node(ts[0].get(), from, coll));
      return c;
    }
    if (from && is_seq(from) && from->items.size() != ts.size())
      in_.fail(t->loc, "'" + coll + "' is unpacked into " + std::to_string(ts.size()) + " values here, but the forward trace '" +
                           fw_->def->name + "' (line " + std::to_string(in_.sources().line_col(from->loc).line) + ") puts " +
                           std::to_string(from->items.size()) + " there");
    for (size_t i = 0; i < ts.size(); ++i)
      c.items.push_back(node(ts[i].get(), from && is_seq(from) ? from->items[i].get() : nullptr, coll));
    return c;
  }

  // A tensor type, or a number's: "int 8", "float 0.5", "bool True".
  void typed(Collection* c, const std::string& ts, SourceLoc loc, const std::string& where) {
    std::string head = ts.substr(0, ts.find(' '));
    if (head == "int" || head == "float" || head == "bool") {
      auto v = literal_of_type_string(ts);
      if (!v) in_.fail(loc, "the number '" + c->name + "' has no value in " + where + " (\"" + ts + "\"; like \"int 8\")");
      c->kind = Collection::Kind::Number;
      c->number = std::move(*v);
      return;
    }
    std::string why;
    auto t = ir::parse_type_string(ts, &why);
    if (!t) in_.fail(loc, why + " (" + where + ")");
    c->kind = Collection::Kind::Tensor;
    c->type = *t;
  }

  Interpreter& in_;
  const FunctionObj& fn_;
  const std::map<std::string, ir::TensorType>& given_;
  std::optional<Forward> fw_;
  std::vector<UntypedElement>* untyped_;
};

}  // namespace

namespace {

// `name[i]` with a literal i: the index, else -1.
int64_t literal_index(const ast::Expr* e, const std::string& name) {
  if (!e || e->kind != ExprKind::Subscript || e->items[0]->kind != ExprKind::Name || e->items[0]->name != name) return -1;
  const ast::Expr* i = e->items[1].get();
  return i->kind == ExprKind::Int && i->int_value >= 0 ? i->int_value : -1;
}

// `prims.check_len(name, n)` (a prologue's first check): n, else -1.
int64_t checked_len(const ast::Block& b, const std::string& name) {
  for (const auto& s : b) {
    if (s->kind != ast::StmtKind::Expr || !s->value || s->value->kind != ExprKind::Call) continue;
    const ast::Expr& call = *s->value;
    const ast::Expr& f = *call.items[0];
    bool is_check = (f.kind == ExprKind::Attribute || f.kind == ExprKind::Name) && f.name == "check_len";
    if (is_check && call.args.size() == 2 && call.args[0]->kind == ExprKind::Name && call.args[0]->name == name &&
        call.args[1]->kind == ExprKind::Int)
      return call.args[1]->int_value;
  }
  return -1;
}

}  // namespace

// A prologue's `*args`, read element by element: `x: "cpu f32[2, 2]" = args[0]` (or `x = args[0]`
// typed by a comment).
std::optional<Collection> indexed_collection(Interpreter& in, const FunctionObj& fn, const std::string& name,
                                             const std::map<std::string, ir::TensorType>& given,
                                             std::vector<UntypedElement>* untyped) {
  const ast::Block& body = *fn.info->body;
  std::vector<std::pair<int64_t, const ast::Stmt*>> reads;
  int64_t n = checked_len(body, name);
  // (a call takes at most this many arguments: an index or a check_len beyond it is an error,
  // not a collection of that size)
  constexpr int64_t kMaxArgs = 1 << 16;
  if (n > kMaxArgs) in.fail(fn.info->loc, "'" + fn.info->name + "': check_len(" + name + ", " + std::to_string(n) + ") asks for more than " + std::to_string(kMaxArgs) + " arguments");
  for (const auto& s : body) {
    if ((s->kind != ast::StmtKind::AnnAssign && !s->is_assign()) || s->targets.size() != 1 ||
        s->targets[0]->kind != ExprKind::Name)
      continue;
    int64_t i = literal_index(s->value.get(), name);
    if (i < 0) continue;
    if (i >= kMaxArgs) in.fail(s->loc, name + "[" + std::to_string(i) + "]: more than " + std::to_string(kMaxArgs) + " arguments");
    reads.emplace_back(i, s.get());
    n = std::max(n, i + 1);
  }
  if (reads.empty() && n < 0) return std::nullopt;
  Collection c;
  c.kind = Collection::Kind::Tuple;
  c.items.resize(static_cast<size_t>(std::max<int64_t>(n, 0)));
  Builder b(in, fn, given, std::nullopt, untyped);
  for (const auto& [i, s] : reads) {
    Collection& e = c.items[static_cast<size_t>(i)];
    const ast::Expr& target = *s->targets[0];
    if (e.kind != Collection::Kind::None) continue;  // read twice: the first read types it
    if (s->kind == ast::StmtKind::AnnAssign && s->annotation && s->annotation->kind == ExprKind::Str &&
        !given.count(target.name)) {
      e.name = target.name;
      b.typed_from(&e, s->annotation->str_value, s->annotation->loc, "its annotation");
    } else {
      e = b.node(&target, nullptr, name);
    }
  }
  return c;
}

namespace {

bool is_dtensor_string(const std::string& ts) { return ts.rfind("DTensor ", 0) == 0; }

// The statement that unwraps DTensor `name` into a local tensor, anywhere in b.
const ast::Stmt* find_unwrap(const ast::Block& b, const std::string& name) {
  for (const auto& s : b) {
    const ast::Expr* v = s->value.get();
    if ((s->is_assign() || s->kind == ast::StmtKind::AnnAssign) && s->targets.size() == 1 &&
        s->targets[0]->kind == ExprKind::Name && v) {
      if (v->kind == ExprKind::Call && (v->items[0]->kind == ExprKind::Name || v->items[0]->kind == ExprKind::Attribute) &&
          v->items[0]->name == "get_dtensor_inner_tensor" && v->args.size() == 1 && v->args[0]->kind == ExprKind::Name &&
          v->args[0]->name == name)
        return s.get();
      if (v->kind == ExprKind::Attribute && v->name == "_local_tensor" && v->items[0]->kind == ExprKind::Name &&
          v->items[0]->name == name)
        return s.get();
    }
    if (const ast::Stmt* r = find_unwrap(s->body, name)) return r;
    if (const ast::Stmt* r = find_unwrap(s->orelse, name)) return r;
  }
  return nullptr;
}

const std::string* find_annotation(const ast::Block& b, const std::string& name) {
  for (const auto& s : b)
    if (s->kind == ast::StmtKind::AnnAssign && s->targets.size() == 1 && s->targets[0]->kind == ExprKind::Name &&
        s->targets[0]->name == name && s->annotation && s->annotation->kind == ExprKind::Str)
      return &s->annotation->str_value;
  return nullptr;
}

}  // namespace

std::optional<ir::TensorType> dtensor_declared(const FunctionObj& fn, const std::string& name) {
  if (!fn.info->body) return std::nullopt;
  std::vector<const std::string*> declared = {find_type(*fn.info->body, name), find_annotation(*fn.info->body, name)};
  for (const ast::Param& p : *fn.info->params)
    if (p.name == name && p.annotation && p.annotation->kind == ExprKind::Str) declared.push_back(&p.annotation->str_value);
  for (const std::string* ts : declared) {
    if (!ts || !is_dtensor_string(*ts)) continue;
    auto t = ir::parse_type_string(ts->substr(8), nullptr);
    if (t) return t;
  }
  return std::nullopt;
}

ir::TensorType dtensor_local_type(Interpreter& in, const FunctionObj& fn, const std::string& name,
                                  const ir::TensorType& global, SourceLoc loc) {
  const ast::Stmt* s = find_unwrap(*fn.info->body, name);
  const std::string* ts = nullptr;
  if (s && s->kind == ast::StmtKind::AnnAssign && s->annotation && s->annotation->kind == ExprKind::Str) ts = &s->annotation->str_value;
  if (s && !ts) ts = find_type(*fn.info->body, s->targets[0]->name);
  const std::string declared = "DTensor " + global.str();
  if (!ts)
    in.fail(s ? s->loc : loc, "'" + name + "' is a DTensor (" + declared + ") but " +
                                  (s ? "the statement that unwraps it states no type for its local tensor"
                                     : "'" + fn.info->name + "' never unwraps it (get_dtensor_inner_tensor(" + name + ") or " + name +
                                           "._local_tensor with a type comment)") +
                                  ", which would say this rank's piece of " + rt::shape_str(global.shape) +
                                  ": give the local tensor's type (--type " + name + "=" + rt::dtype_name(global.dtype) +
                                  "[...]) or an input file");
  std::string why;
  auto t = ir::parse_type_string(*ts, &why);
  if (!t) in.fail(s->loc, why);
  if (t->dtype != global.dtype)
    in.fail(s->loc, "'" + name + "' is a DTensor of " + rt::dtype_name(global.dtype) + " but its local tensor is typed " + t->str());
  if (t->shape.size() != global.shape.size())
    in.fail(s->loc, "'" + name + "' is a DTensor of shape " + rt::shape_str(global.shape) + " but its local tensor is typed " + t->str() +
                        " (another number of dimensions)");
  return *t;
}

// A Thunder prologue's module: `t: "cpu f32[8, 4]" = obj.get_parameter('0.weight')` (or
// get_buffer), each key read once (a second read of a key is the first's tensor).
std::optional<Collection> module_collection(Interpreter& in, const FunctionObj& fn,
                                            const std::map<std::string, ir::TensorType>& given,
                                            std::vector<UntypedElement>* untyped, std::vector<ModuleRead>* reads) {
  if (!fn.info->body) return std::nullopt;
  Collection c;
  c.kind = Collection::Kind::Tuple;
  Builder b(in, fn, given, std::nullopt, untyped);
  std::set<std::pair<bool, std::string>> seen;
  for (const auto& s : *fn.info->body) {
    if ((s->kind != ast::StmtKind::AnnAssign && !s->is_assign()) || s->targets.size() != 1 ||
        s->targets[0]->kind != ExprKind::Name || !s->value || s->value->kind != ExprKind::Call)
      continue;
    const ast::Expr& call = *s->value;
    const ast::Expr& f = *call.items[0];
    if (f.kind != ExprKind::Attribute || (f.name != "get_parameter" && f.name != "get_buffer")) continue;
    if (call.args.size() != 1 || call.args[0]->kind != ExprKind::Str || !call.keywords.empty()) continue;
    const bool buffer = f.name == "get_buffer";
    const std::string& key = call.args[0]->str_value;
    if (!seen.insert({buffer, key}).second) continue;
    const ast::Expr& target = *s->targets[0];
    Collection e;
    if (s->kind == ast::StmtKind::AnnAssign && s->annotation && s->annotation->kind == ExprKind::Str && !given.count(target.name)) {
      e.name = target.name;
      b.typed_from(&e, s->annotation->str_value, s->annotation->loc, "its annotation");
    } else {
      e = b.node(&target, nullptr, std::string("the module's ") + (buffer ? "buffers" : "parameters"));
    }
    if (e.kind == Collection::Kind::Number)
      in.fail(s->loc, "'" + target.name + "' = ." + f.name + "('" + key + "') is typed as a number; a module's " +
                          (buffer ? "buffer" : "parameter") + " is a tensor");
    c.items.push_back(std::move(e));
    reads->push_back({key, buffer, s->loc});
  }
  if (c.items.empty()) return std::nullopt;
  return c;
}

std::optional<Collection> collection_param(Interpreter& in, const FunctionObj& fn, size_t index,
                                           const std::map<std::string, ir::TensorType>& given,
                                           std::vector<UntypedElement>* untyped) {
  if (!fn.info->body || index >= fn.info->params->size()) return std::nullopt;
  const std::string& name = (*fn.info->params)[index].name;
  const ast::Stmt* unpack = find_unpack(*fn.info->body, name);
  if (!unpack) return indexed_collection(in, fn, name, given, untyped);
  std::optional<Forward> fw = fn.module ? find_forward(*fn.module, *fn.info) : std::nullopt;
  // backward_fn(saved_for_backward, cotangents): the first is what the forward saved, the second
  // the cotangents of its outputs.
  const ast::Expr* from = nullptr;
  if (fw && fn.info->params->size() == 2) from = index == 0 ? fw->saved : fw->outputs;
  Builder b(in, fn, given, from ? fw : std::nullopt, untyped);
  return b.node(unpack->targets[0].get(), from, name);
}

void fail_untyped(Interpreter& in, const FunctionObj& fn, const std::vector<UntypedElement>& untyped) {
  if (untyped.empty()) return;
  const UntypedElement& u = untyped[0];
  std::string names, types;
  for (size_t i = 0; i < untyped.size(); ++i) {
    names += (i ? ", '" : "'") + untyped[i].name + "' (in '" + untyped[i].collection + "'" +
             (untyped[i].use.empty() ? "" : ": " + untyped[i].use) + ")";
    types += " --type " + untyped[i].name + "=f32[2, 3]";
    if (i == 2 && untyped.size() > 3) {
      types += " ...";
      break;
    }
  }
  const bool one = untyped.size() == 1;
  std::string head = one ? "element '" + u.name + "' of the collection '" + u.collection + "' of '" + fn.info->name +
                               "' has no tensor type" + (u.use.empty() ? "" : " (" + u.use + ")")
                         : std::to_string(untyped.size()) + " elements of the collections of '" + fn.info->name +
                               "' have no tensor type: " + names;
  std::string why = "; no type comment follows " + std::string(one ? "its" : "their") + " unpacking";
  if (!u.backward)
    why += " and " + std::string(one ? "its first use does not determine it" : "their first uses do not determine them");
  else if (u.forward.empty())
    why += " and the file holds no forward trace (augmented_forward_fn) that saves " + std::string(one ? "it" : "them");
  else
    why += ", and the forward trace '" + u.forward + "' does not type what it saves there";
  in.fail(u.loc, head + why + "; give " + (one ? "it" : "each") + " as an input (--input NAME=FILE) or its type (" +
                     types.substr(1) + ")");
}

void collection_tensors(const Collection& c, std::vector<const Collection*>* out) {
  if (c.kind == Collection::Kind::Tensor) out->push_back(&c);
  for (const Collection& x : c.items) collection_tensors(x, out);
}

}  // namespace tracer::interp
