// The Trace IR: a flat list of SSA statements over proxies, with composite ops keeping their
// decomposition as subsymbols.
#pragma once
#include <functional>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "common/source.h"
#include "ir/types.h"
#include "runtime/tensor.h"

namespace tracer::ir {

struct OpDecl;

// An argument of a statement: a constant, a proxy, a concrete tensor (eager mode and execution),
// or a nested sequence.
struct Arg {
  enum class Kind { None, Bool, Int, Float, Str, DType, Proxy, Tensor, Tuple, List, Dict };
  Kind kind = Kind::None;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;
  DType dtype = DType::f32;
  ProxyPtr proxy;
  rt::Tensor tensor;
  std::vector<Arg> items;
  std::vector<std::string> keys;  // Dict keys (str), parallel to items

  static Arg none() { return {}; }
  static Arg of_bool(bool v) { Arg a; a.kind = Kind::Bool; a.b = v; return a; }
  static Arg of_int(int64_t v) { Arg a; a.kind = Kind::Int; a.i = v; return a; }
  static Arg of_float(double v) { Arg a; a.kind = Kind::Float; a.f = v; return a; }
  static Arg of_str(std::string v) { Arg a; a.kind = Kind::Str; a.s = std::move(v); return a; }
  static Arg of_dtype(DType v) { Arg a; a.kind = Kind::DType; a.dtype = v; return a; }
  static Arg of_proxy(ProxyPtr p) { Arg a; a.kind = Kind::Proxy; a.proxy = std::move(p); return a; }
  static Arg of_tensor(rt::Tensor t) { Arg a; a.kind = Kind::Tensor; a.tensor = std::move(t); return a; }
  static Arg of_seq(Kind k, std::vector<Arg> xs) { Arg a; a.kind = k; a.items = std::move(xs); return a; }

  bool is_tensorish() const { return kind == Kind::Proxy || kind == Kind::Tensor; }
  bool is_number() const { return kind == Kind::Int || kind == Kind::Float || kind == Kind::Bool; }
  bool is_seq() const { return kind == Kind::Tuple || kind == Kind::List; }
  double number() const { return kind == Kind::Float ? f : kind == Kind::Int ? double(i) : double(b); }
};

// How a view is made (Proxy::view): from `source` by the view prim `op` with `args` after the
// tensor (reshape, transpose, slice, broadcast_in_dim), or, with no op, the same elements (the
// value a write into source left). `seen`: the root's count of writes when it was made: a view
// made before a later write holds stale values.
struct ViewStep {
  ProxyPtr source;
  const OpDecl* op = nullptr;
  std::vector<Arg> args;
  int seen = 0;
};

// The root of a chain of views written in place: how many writes, and its value after the last
// (weak: that value's own ViewStep points back here).
struct Storage {
  int writes = 0;
  std::weak_ptr<Proxy> current;
  // A printout deleted the name of `current` while other aliases live (Thunder's traces delete
  // names, not memory): its del waits for the next write, which reads it last.
  bool current_deleted = false;
};

// The root of p's chain of views (p itself when it is no view).
const ProxyPtr& view_root(const ProxyPtr& p);
// Whether p was made before its root's last write through an alias: its values are old.
bool stale_alias(const ProxyPtr& p);

// The tensor type of a proxy or tensor argument.
TensorType arg_type(const Arg& a);
// Calls fn on every proxy in a (recursively).
void for_each_proxy(const Arg& a, const std::function<void(const ProxyPtr&)>& fn);

enum class StmtKind { Prim, Composite, Fusion, Del };

struct Stmt {
  StmtKind kind = StmtKind::Prim;
  const OpDecl* op = nullptr;  // Prim only
  std::string callee;          // printed name: "prims.add", "ltorch.linear", "nvFusion0"
  std::vector<Arg> args;       // Prim: bound to the op's parameters, in order
  std::vector<std::pair<std::string, Arg>> kwargs;  // Composite/Fusion: as called
  std::vector<ProxyPtr> outputs;
  bool outputs_as_list = false;  // printed "[a, b] = ..." (fusions) instead of "a, b = ..."
  std::vector<Stmt> subsymbols;  // Composite/Fusion: the decomposition
  std::vector<ProxyPtr> deleted; // Del
  std::string region;            // non-empty inside "with <region>():" (e.g. "checkpoint")
  int region_id = 0;             // distinguishes consecutive regions of one kind
  SourceLoc loc;
  // The composites it was recorded inside, innermost first: each one's call site and name
  // ("ltorch.cross_entropy"). Copies keep it, so a statement that a pass took out of its
  // composite still knows the user's line that made it (run-time errors name that line first).
  std::vector<std::pair<SourceLoc, std::string>> inlined_at;
  // The printout's source comment above it ("/path/model.py:12: x = self.fc(x)"), printed back.
  std::string source;
};

struct Trace {
  std::string name = "computation";
  std::vector<ProxyPtr> inputs;
  std::vector<Stmt> stmts;
  Arg output;
  std::vector<std::string> provenance;  // "Constructed by ..." lines, oldest first
  // The names runs report for the output's leaves, as the program was traced (before passes,
  // which change what makes each value): set by the session, empty where nobody set them.
  std::vector<std::string> output_names;
  // Every name defined in the trace, subsymbols included; new names avoid these.
  std::unordered_set<std::string> names;
  int next_name = 0;

  // A fresh proxy named t<N> (skipping names in use).
  ProxyPtr new_proxy(TensorType type);
  // Renames an auto-named proxy to name if the name is free; returns whether it did.
  bool try_rename(const ProxyPtr& p, const std::string& name);
};

// Thunder-style text of a trace; parses back to the same trace.
std::string print_trace(const Trace& t);
// A one-line rendering of an argument as it is printed in a trace.
std::string print_arg(const Arg& a);
// A string literal in Python's repr style: 'it\'s'.
std::string quote_str(const std::string& s);
std::string print_stmt_line(const Stmt& s);

}  // namespace tracer::ir
