// Helpers shared by the kernel generators (cuda_codegen.cpp, cuda_rows.cpp, cuda_columns.cpp),
// defined in cuda_exprs.cpp: register types, index maps, one primitive's expression, a group's
// inputs and its values' C names. Internal to codegen/.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/group.h"
#include "ir/trace.h"

namespace tracer::codegen::detail {

// How a value lives in registers: float for f32/f16/bf16 (as the CPU computes), double, 64-bit
// integers, bool.
enum class Reg { f32, f64, i64, b8 };
Reg reg_of(rt::DType d);
const char* reg_name(Reg r);

// A trace's value name as a valid C identifier that cannot clash with generated code.
std::string c_name(const std::string& s);

// How index expressions are written: the integer literals' suffix ("LL" for 64-bit, "" where
// every index fits in 32 bits), and, in a row kernel (row > 0), that the flat index i is
// tr_r * row + tr_c with 0 <= tr_c < row: a coordinate is then written over the row tr_r (the
// same for the whole row, so the compiler computes it once per row) and the column tr_c (32-bit
// arithmetic), not by 64-bit divisions of i for every element.
struct Index {
  const char* suffix = "LL";
  long long row = 0;
  long long rows = 0;  // how many rows (tr_r < rows): below 2^31, row coordinates use 32-bit math
  Index(const char* s) : suffix(s) {}  // NOLINT: a suffix alone is a flat index
  Index(const char* s, long long r, long long n) : suffix(s), row(r), rows(n) {}
};
// (i / div) % mod (mod 0: none) over the index `flat` ("i": the element's; another name is taken
// as flat).
std::string index_coord(long long div, long long mod, const Index& ix, const std::string& flat = "i");

// The element offset into a tensor of shape `in` broadcast to `out`, for flat output index i.
std::string offset_expr(const ir::Shape& in, const ir::Shape& out, const Index& ix);
bool broadcasts_to(const ir::Shape& in, const ir::Shape& out);

// The element of a view (ir/group.h) read at flat index i of the group's shape S; a full's or an
// iota's register value at i.
std::string view_offset_expr(const ir::View& v, const ir::Shape& S, const Index& ix, int64_t dim = -1, int64_t shift = 0,
                             const std::string& index = "i");
// Whether view v reads runs: for every flat index i of S that is a multiple of V, elements i to
// i + V - 1 are V consecutive elements of its base starting at a multiple of V (then one 16-byte
// access reads them where the base is aligned). dim and shift as view_offset_expr's (a cat's piece
// along dim, starting at shift).
bool view_runs(const ir::View& v, const ir::Shape& S, int64_t V, int64_t dim = -1, int64_t shift = 0);
std::string creation_expr(const ir::Stmt& p, const ir::Shape& S, const Index& ix);
std::string cat_expr(const ir::CatPlan& c, const ir::Shape& S, const Index& ix, rt::DType dt,
                     const std::function<std::string(const ir::Proxy*)>& pointer);
std::string literal(const ir::Arg& a, Reg math);
std::string convert(const std::string& e, Reg from, rt::DType to);

// A dropout-style comparison of a uniform draw with a number as an exact integer comparison of
// the draw's word (`words` names each draw's word), or nothing when `p` is not one.
std::optional<std::string> unit_compare(const ir::Stmt& p, const std::unordered_map<const ir::Proxy*, std::string>& words);

// The primitives of a group's `prims` that compute `targets`, in order, leaving out reductions
// (`reduction`), views (read, not computed) and those `skip` names; *need gets every value they
// read (targets, operands, transitively; a cat's pieces are read by its expression).
class Namer;
std::vector<const ir::Stmt*> needed_prims(const std::vector<const ir::Stmt*>& prims, const ir::GroupPlan& plan,
                                          const std::vector<ir::ProxyPtr>& targets,
                                          const std::function<bool(const ir::Stmt&)>& skip,
                                          std::unordered_set<const ir::Proxy*>* need);
// One line per chosen primitive, `const REG name = expr;  // name = prims.op`: identity shape ops
// as their operand, fills and iotas at index i of S, cats through their pieces (pointer names
// an input's kernel parameter), the rest by prim_expr.
std::string prim_lines(const std::vector<const ir::Stmt*>& chosen, const ir::GroupPlan& plan, const ir::Shape& S,
                       const Index& ix, bool canonical, Namer& name_of,
                       const std::function<std::string(const ir::Proxy*)>& pointer, const std::string& indent);

// The primitives of s (s itself, or its flattened subsymbols).
void prims_of(const ir::Stmt& s, std::vector<const ir::Stmt*>& out);

// The expression of one elementwise primitive (not a random draw) over its operands, named by
// name_of, converted to the register type of its output's dtype.
std::string prim_expr(const ir::Stmt& p, const std::function<std::string(const ir::ProxyPtr&)>& name_of);

// A group's inputs: the proxies its primitives read before the group defines them, in order of
// first use.
std::vector<ir::ProxyPtr> group_inputs(const std::vector<const ir::Stmt*>& prims);

// C names of a kernel's values: the trace's names made valid and unique, or canonical ones
// ("v0", "v1", ...) for the structure that keys the caches.
class Namer {
 public:
  explicit Namer(bool canonical) : canonical_(canonical) {}
  std::string operator()(const ir::ProxyPtr& p) {
    auto it = names_.find(p.get());
    if (it != names_.end()) return it->second;
    std::string base = canonical_ ? "v" + std::to_string(names_.size()) : c_name(p->name), n = base;
    for (int j = 2; used_.count(n); ++j) n = base + "_" + std::to_string(j);
    used_.insert(n);
    names_[p.get()] = n;
    return n;
  }

 private:
  bool canonical_;
  std::unordered_map<const ir::Proxy*, std::string> names_;
  std::unordered_set<std::string> used_;
};

}  // namespace tracer::codegen::detail
