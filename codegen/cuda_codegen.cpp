// CUDA C++ for elementwise groups, and the kernels of a trace; see cuda_codegen.h and
// docs/codegen.md. Row groups are in cuda_rows.cpp, column groups in cuda_columns.cpp, the
// expression helpers they share in cuda_exprs.cpp.
#include "codegen/cuda_codegen.h"
#include "codegen/cuda_codegen_detail.h"

#include <cctype>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "codegen/cuda_attention.h"
#include "codegen/cuda_prelude.h"
#include "codegen/cuda_reduce.h"
#include "ir/fusion.h"
#include "ir/group.h"
#include "ir/op.h"
#include "ir/op_rules.h"
#include "runtime/kernels.h"

namespace tracer::codegen {
using ir::Arg;
using ir::DType;
using ir::Stmt;
using ir::StmtKind;
using K = Arg::Kind;
using namespace detail;

std::string load_expr(DType d, const std::string& ref) {
  switch (d) {
    case DType::bf16: return "tr_from_bf16(" + ref + ")";
    case DType::f16: return "tr_from_f16(" + ref + ")";
    case DType::b8: return "(" + ref + " != 0)";
    case DType::f32:
    case DType::f64: return ref;
    default: return "(long long)" + ref;
  }
}

std::string store_expr(DType d, const std::string& v, bool exact) {
  switch (d) {
    case DType::bf16: return (exact ? "tr_bf16_bits(" : "tr_to_bf16(") + v + ")";
    case DType::f16: return "tr_to_f16(" + v + ")";
    case DType::b8: return "(tr_b8)(" + v + ")";
    case DType::f32:
    case DType::f64: return v;
    default: return std::string("(") + storage_name(d) + ")(" + v + ")";
  }
}


bool is_elementwise_group(const Stmt& s, std::string* why) {
  if (s.kind == StmtKind::Del) {
    if (why) *why = "a del";
    return false;
  }
  ir::GroupPlan g = ir::plan_group(s);
  if (g.kind == ir::GroupKind::Elementwise) return true;
  if (why) *why = g.kind == ir::GroupKind::None ? g.why : "it reduces";
  return false;
}

namespace {
Kernel generate(const Stmt& s, const std::string& name, bool canonical, const std::unordered_set<const ir::Proxy*>& may_alias,
                bool segment = false);
}

std::unordered_set<const ir::Proxy*> alias_candidates(const Stmt& s, const std::unordered_set<const ir::Proxy*>& dying) {
  std::unordered_set<const ir::Proxy*> out;
  if (dying.empty()) return out;
  ir::GroupPlan plan = ir::plan_group(s);
  // Only inputs read at the element written (directly or as a reshape): a transposed input is
  // read at other elements than the one the output writes.
  std::unordered_set<const ir::Proxy*> in_order = ir::in_order_inputs(plan);
  for (const auto& p : plan.inputs) {
    if (!dying.count(p.get()) || !in_order.count(p.get())) continue;
    for (const auto& o : s.outputs)
      if (o->type.dtype == p->type.dtype && rt::numel(o->type.shape) == rt::numel(p->type.shape)) out.insert(p.get());
  }
  return out;
}

const char* storage_name(DType d) {
  switch (d) {
    case DType::f64: return "double";
    case DType::f32: return "float";
    case DType::f16: return "tr_f16";
    case DType::bf16: return "tr_bf16";
    case DType::i64: return "long long";
    case DType::i32: return "int";
    case DType::i8: return "signed char";
    case DType::u8: return "unsigned char";
    case DType::b8: return "tr_b8";
  }
  return "?";
}

std::string name_by_hash(std::string& source) {
  std::string symbol = "tr_" + hash_hex(source);
  for (size_t at = source.find("tr_kernel"); at != std::string::npos; at = source.find("tr_kernel", at + symbol.size()))
    source.replace(at, 9, symbol);
  return symbol;
}

std::string hash_hex(const std::string& text) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

Kernel generate_elementwise(const Stmt& s, const std::string& name, const std::unordered_set<const ir::Proxy*>& may_alias) {
  Kernel k = generate(s, name, false, may_alias);
  Kernel c = generate(s, "tr_kernel", true, may_alias);
  k.symbol = name_by_hash(c.source);
  k.structure = std::move(c.source);
  return k;
}

namespace {
Kernel generate(const Stmt& s, const std::string& name, bool canonical, const std::unordered_set<const ir::Proxy*>& may_alias,
                bool segment) {
  ir::GroupPlan plan = ir::plan_group(s);
  if (plan.kind != ir::GroupKind::Elementwise)
    throw std::invalid_argument("codegen: '" + ir::print_stmt_line(s) + "' is not an elementwise group: " +
                                (plan.why.empty() ? std::string("it reduces") : plan.why));
  std::vector<const Stmt*> prims;
  prims_of(s, prims);
  const ir::Shape& shape = plan.shape;
  Kernel k;
  k.name = name;
  k.elements = rt::numel(shape);
  k.origin = ir::print_stmt_line(s);

  const std::vector<ir::ProxyPtr> inputs = plan.inputs;
  Namer name_of(canonical);
  // What the arithmetic reads: inputs as they are, and views of inputs (read through strides;
  // a view that reads its input in order is loaded as the input itself, vectorized).
  std::vector<ir::ProxyPtr> read;  // in first-use order
  {
    std::unordered_set<const ir::Proxy*> seen, defined;
    for (const Stmt* p : prims) {
      bool view_op = (ir::layout_prim(*p) && p->op->name != "full" && p->op->name != "iota") || plan.cats.count(p->outputs[0].get());
      if (!view_op)
        for (const Arg& a : p->args)
          ir::for_each_proxy(a, [&](const ir::ProxyPtr& q) {
            if (!defined.count(q.get()) && seen.insert(q.get()).second) read.push_back(q);
          });
      for (const auto& o : p->outputs) defined.insert(o.get());
      for (const auto& o : p->outputs)
        if (plan.views.count(o.get())) defined.erase(o.get());
    }
    for (const auto& o : s.outputs)  // a view the group hands on is written through a load
      if (plan.views.count(o.get()) && seen.insert(o.get()).second) read.push_back(o);
  }
  std::vector<ir::ProxyPtr> full_in, bcast_in, strided;  // full_in: values read at i, 16 bytes at a time
  std::unordered_map<const ir::Proxy*, ir::ProxyPtr> base_of;  // full_in value -> the buffer it reads
  std::unordered_map<const ir::Proxy*, std::string> vec_ptr, scalar_ref;  // full_in views: where i0 and i read
  std::unordered_set<const ir::Proxy*> vec_cats;  // cats read 16 bytes at a time (full_in too)
  const bool small_idx = rt::numel(plan.shape) + (1LL << 24) < (1LL << 31);
  const char* suffix = small_idx ? "" : "LL";
  std::vector<ir::ProxyPtr> strided_bases;
  auto stripped = [](const ir::Shape& x) {
    size_t j = 0;
    while (j < x.size() && x[j] == 1) ++j;
    return ir::Shape(x.begin() + static_cast<std::ptrdiff_t>(j), x.end());
  };
  auto input_ptr = [&](const ir::Proxy* b) -> ir::ProxyPtr {
    for (const auto& q : inputs)
      if (q.get() == b) return q;
    throw std::logic_error("codegen: a view's input is not one of the group's");
  };
  for (const auto& q : read) {
    auto v = plan.views.find(q.get());
    if (v == plan.views.end()) {
      if (q->type.shape == shape) {
        full_in.push_back(q);
        base_of[q.get()] = q;
      } else {
        bcast_in.push_back(q);
      }
    } else if (v->second.contiguous() && stripped(v->second.shape) == stripped(shape)) {
      full_in.push_back(q);
      base_of[q.get()] = input_ptr(v->second.base);
    } else {
      strided.push_back(q);
    }
  }
  // Views and cats read 16 bytes at a time where the elements of a vector are consecutive in
  // their input (the innermost sub-dimension of the last dimension has stride 1 and a multiple
  // of V elements, every other stride and the offset are multiples of V): the heads of q, k and
  // v split from a qkv projection, a transposed attention output merged back, their cat.
  std::vector<ir::ProxyPtr> cats_in;
  for (const Stmt* p : prims)
    if (plan.cats.count(p->outputs[0].get())) cats_in.push_back(p->outputs[0]);
  {
    size_t nv = 16;
    for (const auto& p : full_in) nv = std::min(nv, rt::dtype_size(p->type.dtype));
    for (const auto& o : s.outputs) nv = std::min(nv, rt::dtype_size(o->type.dtype));
    for (const auto& q : strided) nv = std::min(nv, rt::dtype_size(q->type.dtype));
    for (const auto& q : cats_in) nv = std::min(nv, rt::dtype_size(q->type.dtype));
    const int64_t V0 = static_cast<int64_t>(std::min<size_t>(8, 16 / nv));
    auto vec_view = [&](const ir::View& v, int64_t shift) {
      if (shape.empty() || shape.back() % V0 != 0 || v.shape.empty() || v.dims.back().empty()) return false;
      const ir::SubDim& last = v.dims.back().back();
      if (last.stride != 1 || last.size % V0 != 0 || v.offset % V0 != 0 || shift % V0 != 0) return false;
      for (size_t e = 0; e < v.dims.size(); ++e)
        for (size_t j = 0; j < v.dims[e].size(); ++j)
          if (!(e + 1 == v.dims.size() && j + 1 == v.dims[e].size()) && v.dims[e][j].stride % V0 != 0) return false;
      return true;
    };
    std::vector<ir::ProxyPtr> still;
    for (const auto& q : strided) {
      const ir::View& v = plan.views.at(q.get());
      if (vec_view(v, 0)) {
        full_in.push_back(q);
        vec_ptr[q.get()] = "p_" + name_of(input_ptr(v.base)) + " + (" + view_offset_expr(v, shape, suffix, -1, 0, "i0") + ")";
        scalar_ref[q.get()] = "p_" + name_of(input_ptr(v.base)) + "[" + view_offset_expr(v, shape, suffix) + "]";
      } else {
        still.push_back(q);
      }
    }
    strided = still;
    for (const auto& q : cats_in) {
      const ir::CatPlan& c = plan.cats.at(q.get());
      bool ok = c.dim + 1 == shape.size();
      for (size_t j = 0; ok && j < c.pieces.size(); ++j) ok = vec_view(c.pieces[j], c.bounds[j]) && c.bounds[j + 1] % V0 == 0;
      if (ok) vec_cats.insert(q.get());
    }
    for (const auto& q : cats_in)
      if (vec_cats.count(q.get())) full_in.push_back(q);
  }
  // Pointers that may share memory (an output written over a dying input) are not restrict.
  auto aliased_output = [&](const ir::ProxyPtr& o) {
    for (const auto& p : inputs)
      if (may_alias.count(p.get()) && p->type.dtype == o->type.dtype && rt::numel(p->type.shape) == rt::numel(o->type.shape)) return true;
    return false;
  };
  for (const auto& p : inputs) k.params.push_back({p->name, p->type, false, p, may_alias.count(p.get()) > 0});
  for (const auto& o : s.outputs) k.params.push_back({o->name, o->type, true, o, aliased_output(o)});
  auto restrict_of = [&](const ir::ProxyPtr& p) {
    for (const KernelParam& q : k.params)
      if (q.proxy == p) return q.may_alias ? "* " : "* __restrict__ ";
    return "* __restrict__ ";
  };

  // Vector width: 16 bytes of the narrowest full-size tensor per access, at most 8 elements
  // (views read one element at a time count too: the vectorized views were chosen for it).
  size_t narrow = 16;
  for (const auto& p : full_in) narrow = std::min(narrow, rt::dtype_size(p->type.dtype));
  for (const auto& p : strided) narrow = std::min(narrow, rt::dtype_size(p->type.dtype));
  for (const auto& o : s.outputs) narrow = std::min(narrow, rt::dtype_size(o->type.dtype));
  k.vector_width = static_cast<int>(std::min<size_t>(8, 16 / narrow));
  // Inputs broadcast along every dimension but the last (a bias, a norm's weight): the V
  // elements of a vector read V consecutive entries, one vector load, when V divides the row.
  std::vector<ir::ProxyPtr> row_in, other_in;
  const int64_t row = shape.empty() ? 0 : shape.back();
  for (const auto& p : bcast_in) {
    const ir::Shape& ps = p->type.shape;
    bool is_row = shape.size() >= 2 && !ps.empty() && ps.back() == row && rt::numel(ps) == row && row % k.vector_width == 0;
    (is_row ? row_in : other_in).push_back(p);
  }
  bcast_in = other_in;
  // One-element inputs (an optimizer's coefficients, a loss scale) are read once, before the
  // loops, and passed to the element function by value: read inside it they were loaded again
  // every iteration, since the outputs may be written over inputs (no __restrict__) and the
  // compiler cannot move a load above a store that may alias it (9 loads and conversions per 8
  // elements of an AdamW update). No output aliases them: an output written over an input has
  // that input's element count, and a group of one element reads before it writes.
  std::vector<ir::ProxyPtr> scalar_in;
  {
    std::vector<ir::ProxyPtr> rest;
    for (const auto& p : bcast_in) (rt::numel(p->type.shape) == 1 && rt::numel(shape) > 1 ? scalar_in : rest).push_back(p);
    bcast_in = rest;
  }
  // The launcher takes the vector path only where every pointer read or written 16 bytes at a
  // time is 16-byte aligned: the full-size tensors and these (rows, the buffers of vectorized
  // views and cats). One-element and broadcast inputs are read an element at a time, and may sit
  // anywhere (an optimizer's coefficients are 8-byte views into one f64 tensor).
  {
    std::unordered_set<const ir::Proxy*> vector_read;
    for (const auto& p : row_in) vector_read.insert(p.get());
    for (const auto& q : full_in) {
      auto v = plan.views.find(q.get());
      if (vec_ptr.count(q.get()) && v != plan.views.end()) vector_read.insert(input_ptr(v->second.base).get());
    }
    for (const auto& [v, c] : plan.cats)
      if (vec_cats.count(v))
        for (const ir::View& piece : c.pieces) vector_read.insert(input_ptr(piece.base).get());
    for (KernelParam& kp : k.params) kp.vector = !kp.output && vector_read.count(kp.proxy.get()) > 0;
  }
  // The buffers views are read from (each passed once to the element function).
  auto add_base = [&](const ir::Proxy* base) {
    ir::ProxyPtr b = input_ptr(base);
    if (std::find(strided_bases.begin(), strided_bases.end(), b) == strided_bases.end() &&
        std::find(bcast_in.begin(), bcast_in.end(), b) == bcast_in.end())
      strided_bases.push_back(b);
  };
  for (const auto& q : strided) add_base(plan.views.at(q.get()).base);
  for (const auto& [v, c] : plan.cats)
    for (const ir::View& piece : c.pieces) add_base(piece.base);

  std::ostringstream body;
  // The element function: one line per primitive.
  if (!canonical) body << "// " << k.origin << "\n";
  // Indices in 32 bits when every element's index fits (fewer instructions per element).
  // (with room for the grid-stride step past the end: up to 16 blocks of 256 per multiprocessor)
  const bool small = small_idx;
  const std::string idx = small ? "int" : "long long";
  // Where the group has rows (rank 2 or more, rows longer than one element), the element also
  // gets its row and column (i = tr_r * C + tr_c), and broadcast inputs, views and iotas are
  // indexed over them: a vector of V elements within one row computes the row once, and a
  // column coordinate is tr_c, not i % C (a cross entropy's targets were 4 divisions a logit).
  const long long C = shape.empty() ? 1 : shape.back();
  // (only where something is indexed by them: broadcast inputs, views, cats, fills and iotas;
  // without, members of a horizontal kernel of different shapes share their code)
  bool indexed = !bcast_in.empty() || !strided.empty() || !plan.cats.empty();
  for (const Stmt* p : prims) indexed = indexed || p->op->name == "full" || p->op->name == "iota";
  const bool split = indexed && shape.size() >= 2 && C > 1 && C < rt::numel(shape);
  const Index ix = split ? Index(suffix, C, rt::numel(shape) / C) : Index(suffix);
  const std::string before_element = body.str();
  body.str("");
  body << "__device__ __forceinline__ void " << name << "_element(" << idx << " i";
  if (split) body << ", " << idx << " tr_r, " << idx << " tr_c";
  for (const auto& p : full_in) body << ", const " << reg_name(reg_of(p->type.dtype)) << " " << name_of(p);
  for (const auto& p : row_in) body << ", const " << reg_name(reg_of(p->type.dtype)) << " " << name_of(p);
  auto scalar_slot = [&](const ir::ProxyPtr& p) { return "@scalar_reg_" + name_of(p) + "@"; };
  for (const auto& p : scalar_in) body << ", const " << scalar_slot(p) << " " << name_of(p);
  for (const auto& p : bcast_in)
    body << ", const " << storage_name(p->type.dtype) << "* __restrict__ p_" << name_of(p);
  for (const auto& p : strided_bases)
    body << ", const " << storage_name(p->type.dtype) << "* __restrict__ p_" << name_of(p);
  // Random draws: the kernel computes the Philox words, four elements per block of the generator
  // (consecutive elements share one), and passes each element its word.
  // Only draws whose seed and offset are group inputs (or constants): one computed inside the
  // group (a chained offset) is known per element only, so such a draw computes its own word.
  std::unordered_set<const ir::Proxy*> input_set;
  for (const auto& p : inputs) input_set.insert(p.get());
  auto outside = [&](const Arg& a) { return a.kind != K::Proxy || input_set.count(a.proxy.get()) > 0; };
  std::vector<const Stmt*> draws;
  for (const Stmt* p : prims)
    if (p->op->name == "uniform_philox" && outside(p->args[5]) && outside(p->args[6])) draws.push_back(p);
  auto word_name = [&](size_t d) { return "rw" + std::to_string(d); };
  for (size_t d = 0; d < draws.size(); ++d) body << ", const unsigned int " << word_name(d);
  std::vector<std::string> out_regs;
  for (const auto& o : s.outputs) {
    std::string r = "out_" + name_of(o);
    out_regs.push_back(r);
    body << ", " << reg_name(reg_of(o->type.dtype)) << "& " << r;
  }
  body << ") {\n";
  for (const auto& p : bcast_in)
    body << "  const " << reg_name(reg_of(p->type.dtype)) << " " << name_of(p) << " = "
         << load_expr(p->type.dtype, "p_" + name_of(p) + "[" + offset_expr(p->type.shape, shape, ix) + "]") << ";\n";
  for (const auto& q : strided) {
    const ir::View& v = plan.views.at(q.get());
    body << "  const " << reg_name(reg_of(q->type.dtype)) << " " << name_of(q) << " = "
         << load_expr(q->type.dtype, "p_" + name_of(input_ptr(v.base)) + "[" + view_offset_expr(v, shape, ix) + "]") << ";\n";
  }
  std::unordered_map<const ir::Proxy*, std::string> unit_words;  // uniform [0, 1) f32 draws: their words
  for (const Stmt* p : prims) {
    const std::string& op = p->op->name;
    const ir::ProxyPtr& out = p->outputs[0];
    DType od = out->type.dtype;
    std::string expr;
    if (plan.views.count(out.get())) continue;  // read through strides where used
    if (auto same = plan.same_as.find(out.get()); same != plan.same_as.end()) {
      expr = name_of(same->second);
    } else if (op == "full" || op == "iota") {
      expr = creation_expr(*p, shape, ix);
    } else if (vec_cats.count(out.get())) {
      continue;  // read 16 bytes at a time by the kernel, passed in as a value
    } else if (auto c = plan.cats.find(out.get()); c != plan.cats.end()) {
      expr = cat_expr(c->second, shape, ix, od, [&](const ir::Proxy* b) { return "p_" + name_of(input_ptr(b)); });
    } else if (op == "uniform_philox") {
      // Element i of the draw (its shape is the output's: a draw of another shape is not fused).
      if (out->type.shape != shape) throw std::invalid_argument("codegen: a random draw of another shape than the group's output");
      auto word = [&](const Arg& a) {
        return a.kind == K::Proxy ? "(unsigned long long)" + name_of(a.proxy) : std::to_string(static_cast<unsigned long long>(a.i)) + "ULL";
      };
      bool f64 = od == DType::f64;
      Reg m = f64 ? Reg::f64 : Reg::f32;
      auto d = std::find(draws.begin(), draws.end(), p);
      std::string w = d != draws.end() ? word_name(static_cast<size_t>(d - draws.begin()))
                                       : "tr_philox_word((unsigned long long)i, " + word(p->args[5]) + ", " + word(p->args[6]) + ")";
      expr = convert(std::string(f64 ? "tr_uniform_word_f64(" : "tr_uniform_word_f32(") + w + ", " + literal(p->args[1], m) + ", " +
                         literal(p->args[2], m) + ")",
                     m, od);
      if (od == DType::f32 && p->args[1].is_number() && p->args[1].number() == 0.0 && p->args[2].is_number() &&
          p->args[2].number() == 1.0)
        unit_words[out.get()] = w;
    } else if (auto cmp = unit_compare(*p, unit_words)) {
      expr = *cmp;
    } else {
      expr = prim_expr(*p, [&](const ir::ProxyPtr& q) { return name_of(q); });
    }
    body << "  const " << reg_name(reg_of(od)) << " " << name_of(out) << " = " << expr << ";  // "
         << (canonical ? name_of(out) : out->name) << " = prims." << op << "\n";
  }
  for (size_t j = 0; j < s.outputs.size(); ++j) body << "  " << out_regs[j] << " = " << name_of(s.outputs[j]) << ";\n";
  body << "}\n\n";
  // A one-element input that the element function only ever converts to float (an f64
  // coefficient of f32 math) is converted once, where it is read: a double held across the
  // loops takes two registers (an AdamW update's nine coefficients: 58 -> 74 registers a thread).
  std::unordered_map<const ir::Proxy*, std::string> scalar_reg;
  {
    std::string fn = body.str();
    const size_t open = fn.find(") {\n");  // (every scan first: the replacements move the text)
    for (const auto& p : scalar_in) {
      const std::string x = name_of(p), cast = "(float)(" + x + ")";
      auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
      bool only_float = reg_of(p->type.dtype) != Reg::b8;
      for (size_t at = fn.find(x, open); at != std::string::npos && only_float; at = fn.find(x, at + x.size())) {
        if ((at > 0 && ident(fn[at - 1])) || (at + x.size() < fn.size() && ident(fn[at + x.size()]))) continue;
        only_float = at >= 8 && fn.compare(at - 8, cast.size(), cast) == 0;
      }
      scalar_reg[p.get()] = only_float ? "float" : reg_name(reg_of(p->type.dtype));
    }
    for (const auto& p : scalar_in) {
      const std::string slot = scalar_slot(p);
      for (size_t at = fn.find(slot); at != std::string::npos; at = fn.find(slot, at)) fn.replace(at, slot.size(), scalar_reg[p.get()]);
    }
    body.str(before_element + fn);
    body.seekp(0, std::ios_base::end);
  }

  // The kernel: a grid-stride loop over vectors of vector_width elements, then the tail.
  const int V = k.vector_width;
  // (segment: a device function that a horizontal kernel calls with its share of the blocks)
  body << (segment ? "__device__ __forceinline__ void " : "extern \"C\" __global__ void __launch_bounds__(256) ") << name << "(";
  bool first_param = true;
  for (const auto& p : inputs) {
    body << (first_param ? "" : ", ") << "const " << storage_name(p->type.dtype) << restrict_of(p) << "p_" << name_of(p);
    first_param = false;
  }
  for (const auto& o : s.outputs) {
    body << (first_param ? "" : ", ") << storage_name(o->type.dtype) << restrict_of(o) << "p_" << name_of(o);
    first_param = false;
  }
  if (segment) {
    body << ", long long n, int vec_ok, unsigned tr_block, unsigned tr_blocks) {\n";
    body << "  const " << idx << " stride = (" << idx << ")tr_blocks * blockDim.x;\n";
    body << "  const " << idx << " first = (" << idx << ")tr_block * blockDim.x + threadIdx.x;\n";
  } else {
    body << ", long long n, int vec_ok) {\n";
    body << "  const " << idx << " stride = (" << idx << ")gridDim.x * blockDim.x;\n";
    body << "  const " << idx << " first = (" << idx << ")blockIdx.x * blockDim.x + threadIdx.x;\n";
  }
  body << "  constexpr int V = " << V << ";\n";
  body << "  const " << idx << " nvec = vec_ok ? (" << idx << ")(n / V) : 0;\n";
  // (kernel-scope names of their own: the kernel's locals are V, NAME_v, NAME_o)
  for (const auto& p : scalar_in)
    body << "  const " << scalar_reg.at(p.get()) << " tr_s_" << name_of(p) << " = "
         << (scalar_reg.at(p.get()) == "float" && reg_of(p->type.dtype) != Reg::f32 ? "(float)(" : "(")
         << load_expr(p->type.dtype, "p_" + name_of(p) + "[0]") << ");\n";
  // A draw's seed and offset: scalar tensors of the group (read once) or constants.
  auto rng_word = [&](const Arg& a) {
    return a.kind == K::Proxy ? "(unsigned long long)p_" + name_of(a.proxy) + "[0]"
                              : std::to_string(static_cast<unsigned long long>(a.i)) + "ULL";
  };
  for (size_t d = 0; d < draws.size(); ++d)
    body << "  const unsigned long long " << word_name(d) << "_seed = " << rng_word(draws[d]->args[5]) << ", " << word_name(d)
         << "_offset = " << rng_word(draws[d]->args[6]) << ";\n";
  auto call = [&](const std::string& idx, const std::string& row_col, const std::function<std::string(const ir::ProxyPtr&)>& full_value,
                  const std::function<std::string(size_t)>& word, const std::function<std::string(const ir::ProxyPtr&)>& row_value) {
    std::ostringstream c;
    c << name << "_element(" << idx;
    if (split) c << ", " << row_col;
    for (const auto& p : full_in) c << ", " << full_value(p);
    for (const auto& p : row_in) c << ", " << row_value(p);
    for (const auto& p : scalar_in) c << ", tr_s_" << name_of(p);
    for (const auto& p : bcast_in) c << ", p_" << name_of(p);
    for (const auto& p : strided_bases) c << ", p_" << name_of(p);
    for (size_t d = 0; d < draws.size(); ++d) c << ", " << word(d);
    for (const auto& r : out_regs) c << ", " << r;
    c << ");";
    return c.str();
  };
  body << "  for (" << idx << " v = first; v < nvec; v += stride) {\n";
  body << "    const " << idx << " i0 = v * V;\n";
  // The vector's elements share a row when V divides C (i0 is a multiple of V).
  const bool one_row = split && C % V == 0;
  const std::string Cs = std::to_string(C) + suffix;
  if (one_row) body << "    const " << idx << " tr_r0 = i0 / " << Cs << ", tr_c0 = i0 - tr_r0 * " << Cs << ";\n";
  for (const auto& p : full_in) {
    std::string t = storage_name(p->type.dtype);
    body << "    __align__(16) " << t << " " << name_of(p) << "_v[V];\n";
    if (vec_cats.count(p.get())) {  // the piece that holds the vector, then 16 bytes of it
      const ir::CatPlan& c = plan.cats.at(p.get());
      body << "    {\n      const " << idx << " tr_cc = i0 % " << shape.back() << suffix << ";\n";
      for (size_t j = 0; j < c.pieces.size(); ++j) {
        std::string src = "p_" + name_of(input_ptr(c.pieces[j].base)) + " + (" +
                          view_offset_expr(c.pieces[j], shape, suffix, static_cast<int64_t>(c.dim), c.bounds[j], "i0") + ")";
        body << "      " << (j ? "else " : "") << (j + 1 < c.pieces.size() ? "if (tr_cc < " + std::to_string(c.bounds[j + 1]) + suffix + ") " : "")
             << "tr_copy<V * sizeof(" << t << ")>(" << name_of(p) << "_v, " << src << ");\n";
      }
      body << "    }\n";
    } else {
      std::string src = vec_ptr.count(p.get()) ? vec_ptr.at(p.get()) : "p_" + name_of(base_of.at(p.get())) + " + i0";
      body << "    tr_copy<V * sizeof(" << t << ")>(" << name_of(p) << "_v, " << src << ");\n";
    }
  }
  for (const auto& p : row_in) {
    std::string t = storage_name(p->type.dtype);
    body << "    __align__(16) " << t << " " << name_of(p) << "_v[V];\n";
    body << "    tr_copy<V * sizeof(" << t << ")>(" << name_of(p) << "_v, p_" << name_of(p) << " + i0 % " << row << suffix << ");\n";
  }
  for (const auto& o : s.outputs) body << "    __align__(16) " << storage_name(o->type.dtype) << " " << name_of(o) << "_o[V];\n";
  bool blocked = V % 4 == 0;  // the vector covers whole generator blocks (i0 is a multiple of V)
  for (size_t d = 0; d < draws.size() && blocked; ++d) {
    std::string w = word_name(d);
    body << "    unsigned int " << w << "_v[V];\n#pragma unroll\n    for (int q = 0; q < V; q += 4) {\n";
    body << "      const uint4 r = tr_philox4((unsigned long long)(i0 + q) >> 2, " << w << "_seed, " << w << "_offset);\n";
    body << "      " << w << "_v[q] = r.x; " << w << "_v[q + 1] = r.y; " << w << "_v[q + 2] = r.z; " << w << "_v[q + 3] = r.w;\n    }\n";
  }
  body << "#pragma unroll\n    for (int k = 0; k < V; ++k) {\n";
  for (size_t j = 0; j < s.outputs.size(); ++j) body << "      " << reg_name(reg_of(s.outputs[j]->type.dtype)) << " " << out_regs[j] << ";\n";
  body << "      "
       << call("i0 + k", one_row ? "tr_r0, tr_c0 + k" : "(i0 + k) / " + Cs + ", (i0 + k) % " + Cs,
               [&](const ir::ProxyPtr& p) { return load_expr(p->type.dtype, name_of(p) + "_v[k]"); },
               [&](size_t d) {
                 return blocked ? word_name(d) + "_v[k]"
                                : "tr_philox_word((unsigned long long)(i0 + k), " + word_name(d) + "_seed, " + word_name(d) + "_offset)";
               },
               [&](const ir::ProxyPtr& p) { return load_expr(p->type.dtype, name_of(p) + "_v[k]"); })
       << "\n";
  for (size_t j = 0; j < s.outputs.size(); ++j)
    body << "      " << name_of(s.outputs[j]) << "_o[k] = " << store_expr(s.outputs[j]->type.dtype, out_regs[j], true) << ";\n";
  body << "    }\n";
  for (const auto& o : s.outputs)
    body << "    tr_copy<V * sizeof(" << storage_name(o->type.dtype) << ")>(p_" << name_of(o) << " + i0, " << name_of(o) << "_o);\n";
  body << "  }\n";
  body << "  for (" << idx << " i = nvec * V + first; i < (" << idx << ")n; i += stride) {\n";
  for (size_t j = 0; j < s.outputs.size(); ++j) body << "    " << reg_name(reg_of(s.outputs[j]->type.dtype)) << " " << out_regs[j] << ";\n";
  body << "    "
       << call("i", "i / " + Cs + ", i % " + Cs, [&](const ir::ProxyPtr& p) {
                 if (vec_cats.count(p.get()))
                   return cat_expr(plan.cats.at(p.get()), shape, suffix, p->type.dtype,
                                   [&](const ir::Proxy* b) { return "p_" + name_of(input_ptr(b)); });
                 if (scalar_ref.count(p.get())) return load_expr(p->type.dtype, scalar_ref.at(p.get()));
                 return load_expr(p->type.dtype, "p_" + name_of(base_of.at(p.get())) + "[i]");
               },
               [&](size_t d) { return "tr_philox_word((unsigned long long)i, " + word_name(d) + "_seed, " + word_name(d) + "_offset)"; },
               [&](const ir::ProxyPtr& p) {
                 return load_expr(p->type.dtype, "p_" + name_of(p) + "[i % " + std::to_string(row) + suffix + "]");
               })
       << "\n";
  for (size_t j = 0; j < s.outputs.size(); ++j)
    body << "    p_" << name_of(s.outputs[j]) << "[i] = " << store_expr(s.outputs[j]->type.dtype, out_regs[j], true) << ";\n";
  body << "  }\n}\n";

  k.source = segment ? body.str() : std::string(cuda_prelude()) + "\n" + body.str();
  return k;
}

// The horizontal kernel's source: each member a segment function, then one kernel whose blocks
// are dealt out to them in order (member j gets k.segment_blocks[j] blocks).
Kernel generate_multi(const std::vector<const Stmt*>& stmts, const std::string& name, bool canonical,
                      const std::vector<std::unordered_set<const ir::Proxy*>>& may_alias, int sm_count) {
  Kernel k;
  k.name = name;
  std::ostringstream src;
  src << cuda_prelude() << "\n";
  // Members whose segment is the same code up to names and the element count (an optimizer's
  // update of each parameter of one kind) share one segment function, called from one place:
  // a block finds its member by bisection over a table of first blocks, and reads the member's
  // pointers from the kernel's argument block by index (__grid_constant__: the arguments stay
  // in the constant bank, indexed in place). With a call site per member NVRTC compiled an
  // inlined copy of the update for each: GPT-2 small's AdamW (148 members) as one kernel took
  // 35.7 s to compile, as three of 64 members 23.2 s (nvcc -cubin, session 24).
  std::vector<std::string> kinds;  // canonical segment text of each kind
  std::vector<int> kind_of;        // member j's kind
  std::vector<std::vector<std::string>> kind_params;  // a kind's pointer types, in order
  std::vector<long long> starts;   // member j's first block; then the total
  std::vector<size_t> bases;       // member j's first pointer in the argument block
  long long start = 0;
  size_t param = 0;
  for (size_t j = 0; j < stmts.size(); ++j) {
    const Kernel shape = generate(*stmts[j], "tr_segment", true, may_alias[j], true);
    int kind = static_cast<int>(std::find(kinds.begin(), kinds.end(), shape.source) - kinds.begin());
    Kernel m = canonical ? shape : generate(*stmts[j], name + "_k" + std::to_string(kind), false, may_alias[j], true);
    if (kind == static_cast<int>(kinds.size())) {
      kinds.push_back(shape.source);
      std::vector<std::string> types;
      for (const KernelParam& kp : m.params) types.push_back(std::string(kp.output ? "" : "const ") + storage_name(kp.type.dtype) + "*");
      kind_params.push_back(types);
      if (canonical) m = generate(*stmts[j], name + "_k" + std::to_string(kind), true, may_alias[j], true);
      src << m.source << "\n";
    }
    kind_of.push_back(kind);
    long long units = m.elements / m.vector_width + m.elements % m.vector_width;
    long long blocks = std::max<long long>(1, std::min<long long>((units + 255) / 256, 16LL * sm_count));
    starts.push_back(start);
    bases.push_back(param);
    start += blocks;
    param += m.params.size();
    k.params.insert(k.params.end(), m.params.begin(), m.params.end());
    k.segment_params.push_back(static_cast<int>(m.params.size()));
    k.segment_blocks.push_back(blocks);
    k.segment_elements.push_back(m.elements);
    k.elements += m.elements;
    if (!canonical) k.origin += (j ? "\n" : "") + m.origin;
  }
  starts.push_back(start);
  const size_t M = stmts.size(), words = (M + 63) / 64;
  auto table = [&](const char* type, const std::string& what, size_t n, const std::function<std::string(size_t)>& at) {
    src << "__constant__ " << type << " " << name << "_" << what << "[" << n << "] = {";
    for (size_t j = 0; j < n; ++j) src << (j ? ", " : "") << at(j);
    src << "};\n";
  };
  table("unsigned", "start", M + 1, [&](size_t j) { return std::to_string(starts[j]) + "u"; });
  table("unsigned", "base", M, [&](size_t j) { return std::to_string(bases[j]) + "u"; });
  table("long long", "n", M, [&](size_t j) { return std::to_string(k.segment_elements[j]) + "LL"; });
  table("unsigned short", "kind", M, [&](size_t j) { return std::to_string(kind_of[j]); });
  // The argument block: every member's pointers in order, then a bit per member (vec_mask: its
  // pointers are 16-byte aligned), a word each 64 members.
  src << "struct " << name << "_args {\n  unsigned long long p[" << std::max<size_t>(param, 1) << "];\n  unsigned long long vec_mask[" << words
      << "];\n};\n";
  src << "#if __CUDA_ARCH__ >= 700\n#define TR_GRID_CONSTANT __grid_constant__\n#else\n#define TR_GRID_CONSTANT\n#endif\n";
  src << "extern \"C\" __global__ void __launch_bounds__(256) " << name << "(const TR_GRID_CONSTANT " << name << "_args a) {\n";
  src << "  const unsigned b = blockIdx.x;\n";
  src << "  int lo = 0, hi = " << M << ";  // the member: " << name << "_start[lo] <= b < " << name << "_start[lo + 1]\n";
  src << "  while (hi - lo > 1) {\n    const int mid = (lo + hi) >> 1;\n    if (b < " << name << "_start[mid]) hi = mid;\n    else lo = mid;\n  }\n";
  src << "  const unsigned base = " << name << "_base[lo], first = " << name << "_start[lo];\n";
  src << "  const int vec_ok = (int)((a.vec_mask[lo >> 6] >> (lo & 63)) & 1ULL);\n";
  src << "  switch (" << name << "_kind[lo]) {\n";
  for (size_t q = 0; q < kinds.size(); ++q) {
    src << "    case " << q << ":\n      " << name << "_k" << q << "(";
    for (size_t a = 0; a < kind_params[q].size(); ++a) src << "(" << kind_params[q][a] << ")a.p[base + " << a << "], ";
    src << name << "_n[lo], vec_ok, b - first, " << name << "_start[lo + 1] - first);\n      break;\n";
  }
  src << "  }\n}\n";
  k.source = src.str();
  k.blocks = start;
  k.segment_kinds = static_cast<int>(kinds.size());
  k.segment_kind = kind_of;
  return k;
}
}  // namespace

Kernel generate_elementwise_multi(const std::vector<const Stmt*>& stmts, const std::string& name,
                                  const std::vector<std::unordered_set<const ir::Proxy*>>& may_alias, int sm_count) {
  if (stmts.empty() || stmts.size() > 512 || may_alias.size() != stmts.size())
    throw std::invalid_argument("codegen: a horizontal kernel takes 1 to 512 groups, with their may_alias sets");
  Kernel k = generate_multi(stmts, name, false, may_alias, sm_count);
  Kernel c = generate_multi(stmts, "tr_kernel", true, may_alias, sm_count);
  k.symbol = name_by_hash(c.source);
  k.structure = std::move(c.source);
  return k;
}

std::vector<Kernel> kernels_for(const ir::Trace& t, int sm_count, int compute_major, long long max_shared_bytes) {
  std::vector<Kernel> out;
  auto label = [&](const Stmt& s, const std::string& at) {
    std::string what = s.kind == StmtKind::Prim ? s.op->name : s.callee;
    size_t dot = what.rfind('.');
    if (dot != std::string::npos) what = what.substr(dot + 1);
    return c_name(t.name) + "_" + c_name(what) + "_" + at;
  };
  // As the GPU executor walks a trace: groups are kernels, other composites run their parts;
  // transposes that only matmuls read are views (no kernel).
  const std::unordered_set<const ir::Proxy*> lazy = ir::lazy_transposes(t.stmts, &t.output);
  std::function<void(const std::vector<Stmt>&, const std::string&)> walk = [&](const std::vector<Stmt>& stmts,
                                                                               const std::string& prefix) {
    for (size_t i = 0; i < stmts.size(); ++i) {
      const Stmt& s = stmts[i];
      std::string at = prefix + std::to_string(i);
      if (s.kind == StmtKind::Del) continue;
      if (s.kind == StmtKind::Prim && s.op && s.op->ns != "prims") continue;  // a host's op: its CPU kernel
      if (prefix.empty() && s.outputs.size() == 1 && lazy.count(s.outputs[0].get())) continue;
      // The executor's buffer reuse takes its donors from the dels right after a statement of
      // the trace itself (a composite's parts have none).
      auto may_alias = [&] {
        std::unordered_set<const ir::Proxy*> dying;
        if (prefix.empty()) ir::dying_after(stmts, i, dying);
        return alias_candidates(s, dying);
      };
      if (is_elementwise_group(s)) {
        out.push_back(generate_elementwise(s, label(s, at), may_alias()));
      } else if (is_row_group(s)) {
        out.push_back(generate_row(s, label(s, at), may_alias(), max_shared_bytes));
      } else if (is_column_group(s)) {
        out.push_back(generate_columns(s, label(s, at), may_alias()));
      } else if (s.kind != StmtKind::Prim) {
        walk(s.subsymbols, at + "_");
      } else if (s.op && (s.op->name == "attention" || s.op->name == "attention_backward")) {
        AttentionPath path = attention_path_for(s, compute_major, max_shared_bytes);
        if (path == AttentionPath::None) continue;
        bool bw = s.op->name == "attention_backward";
        const ir::TensorType& q = s.args[bw ? 1 : 0].proxy->type;
        int64_t E = q.shape.back(), Ev = s.args[bw ? 3 : 2].proxy->type.shape.back();
        int padded = attention_padded(E);
        bool causal = s.args[bw ? 6 : 3].kind == Arg::Kind::Bool && s.args[bw ? 6 : 3].b;
        std::vector<AttentionKernel> ks;
        std::vector<const char*> parts;
        if (path == AttentionPath::Rows) {
          if (bw) {
            ks = {attention_rows_dq_kernel(q.dtype, E, Ev), attention_rows_dkdv_kernel(q.dtype, E, Ev)};
            parts = {"_dq", "_dkdv"};
          } else {
            ks = {attention_rows_forward_kernel(q.dtype, E, Ev)};
            parts = {""};
          }
        } else if (bw) {
          ks = {attention_delta_kernel(q.dtype), attention_backward_kernel(q.dtype, padded, causal), attention_dq_kernel(q.dtype)};
          parts = {"_delta", "", "_dq"};
        } else {
          ks = {attention_forward_kernel(q.dtype, padded, causal)};
          parts = {""};
        }
        for (size_t j = 0; j < ks.size(); ++j) {
          Kernel k;
          k.name = label(s, at) + parts[j];
          k.source = k.structure = ks[j].source;
          k.symbol = ks[j].symbol;
          k.origin = ir::print_stmt_line(s);
          k.elements = rt::numel(s.outputs[0]->type.shape);
          out.push_back(std::move(k));
        }
      } else if (s.op && s.op->name == "uniform" && rt::is_float(s.outputs[0]->type.dtype) && s.args[1].is_number() &&
                 s.args[2].is_number() && std::isfinite(s.args[1].number()) && std::isfinite(s.args[2].number()) &&
                 rt::numel(s.outputs[0]->type.shape) > 0) {
        Kernel k;
        k.name = label(s, at);
        k.source = k.structure = uniform_source(s.outputs[0]->type, s.args[1].number(), s.args[2].number(), &k.symbol);
        k.origin = ir::print_stmt_line(s);
        k.elements = rt::numel(s.outputs[0]->type.shape);
        out.push_back(std::move(k));
      } else if (s.op && s.op->name == "rng_state") {
        Kernel k;
        k.name = label(s, at);
        k.source = k.structure = rng_state_source(&k.symbol);
        k.origin = ir::print_stmt_line(s);
        k.elements = 1;
        out.push_back(std::move(k));
      } else {
        SimpleKernel sk;
        std::string why;
        if (!generate_simple(s, &sk, &why, sm_count)) continue;
        Kernel k;
        k.name = label(s, at);
        k.source = k.structure = sk.source;
        k.symbol = sk.symbol;
        k.symbol2 = sk.symbol2;
        k.origin = ir::print_stmt_line(s);
        k.elements = rt::numel(s.outputs[0]->type.shape);
        out.push_back(std::move(k));
      }
    }
  };
  walk(t.stmts, "");
  return out;
}

}  // namespace tracer::codegen
