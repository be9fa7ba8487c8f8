// Scope resolution: turns every name into a frame slot, a closure cell or a global before the
// code runs, so that lookups at run time are index operations.
#pragma once
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "interpreter/value.h"

namespace tracer::interp {

// How a resolved Name expression finds its variable (stored in ast::Expr::depth).
enum class NameScope : int32_t { Local = 0, Cell = 1, Free = 2, Global = 3 };

// A module's global variables. Chunks of an interactive session are modules of their own that
// share one store, so a function defined in one sees names assigned in later ones.
struct Globals {
  std::unordered_map<std::string, Value> map;
  uint64_t version = 0;
};

struct Module : std::enable_shared_from_this<Module> {
  Module() : Module(std::make_shared<Globals>()) {}
  explicit Module(std::shared_ptr<Globals> g) : store(std::move(g)), globals(store->map), globals_version(store->version) {}
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  std::shared_ptr<Globals> store;
  std::string name;
  int32_t file = -1;
  std::unique_ptr<ast::Module> ast;
  std::deque<FuncInfo> funcs;
  std::unordered_map<const void*, const FuncInfo*> by_node;  // FunctionDef stmt or Lambda expr
  FuncInfo top;
  // Names bound by a def or an import statement, as resolved Name expressions.
  std::unordered_map<const ast::Stmt*, std::vector<ast::ExprPtr>> binds;
  std::unordered_map<std::string, Value>& globals;  // store->map
  // Bumped whenever a global is added or removed (not when one is reassigned): the inline caches
  // of global loads (ast::Expr::global_*) hold pointers into `globals` valid for one version.
  uint64_t& globals_version;  // store->version
  std::unordered_set<std::string> pinned;  // set from the command line; assignments keep the pin
  bool composites = false;   // public functions are recorded as composite ops
  bool names_values = true;  // assignments name traced values (user programs; not stdlib or passes)
  // For static checks: every name resolved as global, and the names the module defines.
  std::vector<const ast::Expr*> global_refs;
  // Attribute chains on global names (a.b, then a.b.c), in the order met.
  std::vector<const ast::Expr*> global_attr_refs;
  std::unordered_set<std::string> module_defs;
  std::unordered_set<std::string> plain_imports;  // roots bound by a module-level `import X[.Y]`
};

// Resolves all names of m.ast; errors (a nonlocal without a binding) go to diags.
void resolve(Module& m, DiagnosticList& diags);

}  // namespace tracer::interp
