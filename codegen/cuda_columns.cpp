// Column groups to CUDA kernels (docs/codegen.md, "Column groups"): reductions over the leading
// dimensions (a bias or norm weight gradient: the sum over the tokens) fused with the elementwise
// values they reduce, in one pass over the data, deterministically.
//
// The group's shape S = [R..., C...] is read as R rows of C columns. The first kernel gives each
// block Ct columns (consecutive threads read consecutive columns: coalesced) and a chunk of
// kRowsPerLane * Ly rows, Ly = 256 / Ct lanes of rows; each thread accumulates its rows in double,
// the lanes combine in shared memory in a fixed order, and the block writes one partial per
// column and reduction. It also writes the group's outputs of the whole shape. The second kernel
// combines the chunks' partials in chunk order, rounds each result to its dtype as the CPU does,
// computes the values the group derives from the reduced ones, and writes them. The split depends
// only on the shape, so results are the same run to run and device to device.
#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <unordered_set>

#include "codegen/cuda_codegen.h"
#include "codegen/cuda_codegen_detail.h"
#include "codegen/cuda_prelude.h"
#include "ir/fusion.h"
#include "ir/group.h"
#include "ir/op.h"

namespace tracer::codegen {

using namespace detail;
using ir::Arg;
using ir::DType;
using ir::Stmt;

namespace {

constexpr int64_t kRowsPerLane = 32;

struct ColumnShape {
  int64_t R = 1, C = 1, Ct = 32, Ly = 8, chunks = 1, per_lane = kRowsPerLane;
  int64_t rows = 8 * kRowsPerLane;  // rows a block (a chunk): Ly lanes of per_lane rows, or as sized below
  bool wave = false;                // sized to one wave (below)
  bool two_per_sm = false;          // of two blocks a multiprocessor, which the launch bounds promise
};

// A reduction of every element to one value (a loss) has one column: a block would keep one
// thread of 32 busy. Such a group is read as R / F rows of F columns instead (the flat index is
// the same), F the widest divisor of R up to 2048, a multiple of 8 where one of at least 256
// divides R (16-byte accesses); each block then folds its columns into one partial (folded
// kernels below). 1: nothing to fold.
int64_t fold_width(int64_t R) {
  if (R < 64) return 1;
  int64_t any = 1, vec = 0;
  for (int64_t d = std::min<int64_t>(R, 2048); d > 1; --d) {
    if (R % d != 0) continue;
    if (any == 1) any = d;
    if (d % 8 == 0) {
      vec = d;
      break;
    }
  }
  return vec >= 256 ? vec : any;
}

// R rows of C columns; V: columns per thread (consecutive, read 16 bytes at a time); C % V == 0;
// accumulators: the double accumulators a thread keeps (reductions times V).
ColumnShape column_shape(int64_t R, int64_t C, int64_t V, int64_t accumulators) {
  ColumnShape c;
  c.R = R;
  c.C = C;
  c.Ct = 32;
  while (c.Ct * V < c.C && c.Ct < 256) c.Ct *= 2;
  // Blocks that divide the thread columns evenly where one can (384 of them: 3 blocks of 128,
  // not 2 of 256 with a quarter idle).
  const int64_t slots = (c.C + V - 1) / V;
  while (c.Ct > 32 && slots % c.Ct != 0) c.Ct /= 2;
  c.Ly = 256 / c.Ct;
  // (Fewer rows a lane for more blocks was tried: a [8192, 3072] GELU backward with its bias
  // gradient went from 0.073 to 0.091 ms on the H200, the bias sums from 0.275 to 0.301 ms in
  // all: the partials doubled and each thread's work halved. 32 rows a lane stays.)
  // Groups of fewer than 264 column blocks take as many rows a block as keep the grid within 264
  // blocks: one wave of two blocks a multiprocessor of an H100 or H200, which their launch bounds
  // (256, 2) guarantee. Wider ones keep 32 rows a lane. (Halving the rows a lane from 32 until
  // the grid passed 264 gave a [8192, 768] layer norm's weight and bias gradients 384 blocks,
  // and at 124 registers a thread, two a multiprocessor, a second wave of 120: 28.6 us for
  // three [8192, 768] sums on an H100, 20.2 in one wave. A [8192, 3072] GELU backward with its
  // bias, 99 registers, went from 384 blocks to 264: 65.6 to 64.1 us; session 23.)
  auto blocks = [&](int64_t per_lane) {
    return ((slots + c.Ct - 1) / c.Ct) * ((c.R + c.Ly * per_lane - 1) / (c.Ly * per_lane));
  };
  static const int64_t min_blocks = [] {
    const char* e = std::getenv("TRACER_COLUMN_MIN_BLOCKS");  // docs/codegen.md, "Column groups"
    return e && std::atoll(e) > 0 ? static_cast<int64_t>(std::atoll(e)) : int64_t{264};
  }();
  // TRACER_COLUMN_WAVE=0: the earlier rule; 1: one wave for narrow groups only (for measuring).
  static const int wave_mode = [] {
    const char* e = std::getenv("TRACER_COLUMN_WAVE");
    return e && (std::string(e) == "0" || std::string(e) == "1") ? std::atoi(e) : 2;
  }();
  const int64_t gx = (slots + c.Ct - 1) / c.Ct;
  if (wave_mode == 0) {
    while (c.per_lane > 8 && blocks(c.per_lane) < min_blocks) c.per_lane /= 2;
  } else if (wave_mode == 2 ? gx < min_blocks : blocks(c.per_lane) < min_blocks) {
    // Rows a block in steps of the lanes' batches (4 rows a lane, cuda_columns's kBatch), at
    // least 8 rows a lane, so that the column blocks times the chunks stay within one wave. Up to
    // 32 accumulators a thread (four reductions of 8 columns) fit 128 registers (launch bounds
    // 256, 2; four spill 24 bytes); more would spill hundreds of bytes (five: 488, six: 1032), so
    // such a group runs one block a multiprocessor, and its wave is half as many blocks.
    c.two_per_sm = accumulators <= 32;
    const int64_t wave = c.two_per_sm ? min_blocks : std::max<int64_t>(1, min_blocks / 2);
    const int64_t step = c.Ly * 4;
    const int64_t chunks = std::max<int64_t>(1, wave / gx);
    int64_t rows = (c.R + chunks - 1) / chunks;
    rows = std::max<int64_t>(c.Ly * 8, (rows + step - 1) / step * step);
    c.rows = rows;
    c.chunks = (c.R + rows - 1) / rows;
    c.wave = true;
    return c;
  }
  // At most 65535 chunks (the grid's second dimension): more rows per lane for very long columns.
  while ((c.R + c.Ly * c.per_lane - 1) / (c.Ly * c.per_lane) > 65535) c.per_lane *= 2;
  c.rows = c.Ly * c.per_lane;
  c.chunks = std::max<int64_t>(1, (c.R + c.rows - 1) / c.rows);
  return c;
}

std::string acc_init(const std::string& op) {
  return op == "sum" ? "0.0" : op == "amax" ? "-__longlong_as_double(0x7ff0000000000000LL)" : "__longlong_as_double(0x7ff0000000000000LL)";
}

std::string acc_step(const std::string& op, const std::string& acc, const std::string& v) {
  if (op == "sum") return acc + " + " + v;
  if (op == "amax") return "(" + acc + " != " + acc + " || " + acc + " >= " + v + ") ? " + acc + " : " + v;
  return "(" + acc + " != " + acc + " || " + acc + " <= " + v + ") ? " + acc + " : " + v;
}

// segment: the two kernels as __device__ functions of a horizontal kernel (generate_columns_multi):
// their block indices and shared arrays come in as parameters (tr_bx, tr_by, tr_shm), the
// rest of the text is the same, so a member computes what it computes alone, in the same order.
Kernel generate_columns_kernel(const Stmt& s, const std::string& name, bool canonical, const std::unordered_set<const ir::Proxy*>& may_alias_in,
                               bool segment = false) {
  ir::GroupPlan plan = ir::plan_group(s);
  if (plan.kind != ir::GroupKind::Columns)
    throw std::invalid_argument("codegen: '" + ir::print_stmt_line(s) + "' is not a column group: " + (plan.why.empty() ? "no reduction over columns" : plan.why));
  // Reduced dimensions of size 1 only: an output of the whole shape written over an input the
  // size of the reduced shape would be read again, overwritten, by the second kernel's
  // per-column values. No output takes an input's buffer there.
  int64_t lead_rows = 1;
  for (size_t d = 0; d < plan.lead; ++d) lead_rows *= plan.shape[d];
  const std::unordered_set<const ir::Proxy*> no_alias;
  const std::unordered_set<const ir::Proxy*>& may_alias = lead_rows == 1 ? no_alias : may_alias_in;
  std::vector<const Stmt*> prims;
  prims_of(s, prims);
  const ir::Shape& S = plan.shape;
  // The rows and columns the kernels iterate over: the group's, or for one column folded (above).
  int64_t Rg = 1, Cg = 1;
  for (size_t d = 0; d < S.size(); ++d) (d < plan.lead ? Rg : Cg) *= S[d];
  const int64_t F = Cg == 1 ? fold_width(Rg) : 1;
  const bool fold = F > 1;
  Rg /= F;
  Cg *= F;
  // Columns per thread: V consecutive ones, the full-shape inputs and outputs read and written 16
  // bytes at a time (one 2-byte access per thread and row held these kernels near 1.2 TB/s). V
  // is 1 when the row length is not a multiple of it, or nothing is of the full shape. The
  // launcher passes vec_ok = 0 when a full-shape pointer is not 16-byte aligned: the same
  // threads then read one element at a time, summing in the same order (the same results).
  int64_t V = 1;
  {
    size_t narrow = 16;
    bool any = false;
    for (const auto& p : plan.inputs)
      if (p->type.shape == S && !plan.view_only.count(p.get())) narrow = std::min(narrow, rt::dtype_size(p->type.dtype)), any = true;
    for (const auto& o : s.outputs)
      if (o->type.shape == S) narrow = std::min(narrow, rt::dtype_size(o->type.dtype)), any = true;
    V = any ? static_cast<int64_t>(std::min<size_t>(8, 16 / narrow)) : 1;
    while (V > 1 && Cg % V != 0) V /= 2;
  }
  int64_t nr_all = 0;
  for (const Stmt* p : prims) nr_all += ir::column_reduction(*p) ? 1 : 0;
  ColumnShape cs = column_shape(Rg, Cg, V, nr_all * V);
  // Folded: the column blocks of a chunk of rows (grid x) each write one partial per reduction.
  const int64_t gx = (cs.C + cs.Ct * V - 1) / (cs.Ct * V);
  Kernel k;
  k.name = name;
  k.origin = ir::print_stmt_line(s);
  k.elements = rt::numel(S);
  k.rows = cs.R;
  k.row_length = cs.C;
  k.columns = true;
  k.column_block = cs.Ct;
  k.column_chunks = cs.chunks;
  k.column_fold = fold;
  k.vector_width = static_cast<int>(V);

  const std::vector<ir::ProxyPtr>& inputs = plan.inputs;
  auto input_ptr = [&](const ir::Proxy* b) -> ir::ProxyPtr {
    for (const auto& q : inputs)
      if (q.get() == b) return q;
    throw std::logic_error("codegen: a view's input is not one of the group's");
  };
  // Reductions, and the values computed after them (per column).
  std::vector<const Stmt*> reductions;
  std::unordered_set<const ir::Proxy*> post;
  std::unordered_set<const Stmt*> post_prims;
  for (const Stmt* p : prims) {
    bool reads_post = false;
    for (const Arg& a : p->args) ir::for_each_proxy(a, [&](const ir::ProxyPtr& q) { reads_post = reads_post || post.count(q.get()); });
    if (ir::column_reduction(*p)) {
      reductions.push_back(p);
      post.insert(p->outputs[0].get());
    } else if (reads_post) {
      post_prims.insert(p);
      for (const auto& o : p->outputs) post.insert(o.get());
    }
  }
  auto aliased_output = [&](const ir::ProxyPtr& o) {
    for (const auto& p : inputs)
      if (may_alias.count(p.get()) && p->type.dtype == o->type.dtype && rt::numel(p->type.shape) == rt::numel(o->type.shape)) return true;
    return false;
  };
  for (const auto& p : inputs) k.params.push_back({p->name, p->type, false, p, may_alias.count(p.get()) > 0});
  for (const auto& o : s.outputs) k.params.push_back({o->name, o->type, true, o, !post.count(o.get()) && aliased_output(o)});
  k.partials = cs.chunks * static_cast<int64_t>(reductions.size()) * (fold ? gx : cs.C);
  Namer name_of(canonical);
  std::vector<ir::ProxyPtr> targets, full_outs;
  for (const Stmt* r : reductions) targets.push_back(r->args[0].proxy);
  for (const auto& o : s.outputs)
    if (!post.count(o.get())) {
      targets.push_back(o);
      full_outs.push_back(o);
    }
  // Views and cats of views the vector path reads V elements at a time (view_runs: a transposed
  // attention gradient read along its head dimension; each cat piece's bounds a multiple of V),
  // among the values the pass over the rows needs. Their bases must be aligned too (vector).
  std::vector<const Stmt*> vec_views, vec_cats;
  if (V > 1) {
    std::unordered_set<const ir::Proxy*> need;
    needed_prims(prims, plan, targets, [&](const Stmt& p) { return post_prims.count(&p) > 0; }, &need);
    std::unordered_set<const ir::Proxy*> bases;
    for (const Stmt* p : prims) {
      const ir::Proxy* q = p->outputs[0].get();
      if (!need.count(q)) continue;
      if (auto v = plan.views.find(q); v != plan.views.end() && view_runs(v->second, S, V)) {
        vec_views.push_back(p);
        bases.insert(v->second.base);
      } else if (auto c = plan.cats.find(q); c != plan.cats.end()) {
        bool ok = true;
        for (size_t j = 0; j < c->second.pieces.size(); ++j)
          ok = ok && view_runs(c->second.pieces[j], S, V, static_cast<int64_t>(c->second.dim), c->second.bounds[j]);
        if (c->second.dim + 1 == S.size())
          for (int64_t b : c->second.bounds) ok = ok && b % V == 0;
        if (!ok) continue;
        vec_cats.push_back(p);
        for (const ir::View& v : c->second.pieces) bases.insert(v.base);
      }
    }
    for (KernelParam& kp : k.params) kp.vector = !kp.output && bases.count(kp.proxy.get()) > 0;
  }
  auto in_list = [](const std::vector<const Stmt*>& xs, const ir::Proxy* q) {
    for (const Stmt* x : xs)
      if (x->outputs[0].get() == q) return true;
    return false;
  };

  // The lines computing `targets` at flat index i (declared by the caller): loads of the inputs
  // and views they need, then their primitives in order. In the first kernel the reductions are
  // accumulated, not computed; in the second their results are registers already.
  // In the first kernel i = tr_r * C + tr_c: index expressions over the row and the column. In
  // the second, i = tr_c (row 0), written over i.
  const Index rows_ix("LL", cs.C, cs.R);
  auto full_in = [&](const ir::ProxyPtr& p) { return p->type.shape == S && !plan.view_only.count(p.get()); };
  auto value_lines = [&](const std::vector<ir::ProxyPtr>& targets, const std::string& ind, bool second, bool vec = false) {
    const Index ix = second ? Index("LL") : rows_ix;
    std::unordered_set<const ir::Proxy*> need;
    // In the first kernel the values computed from the reduced ones wait for the second.
    std::vector<const Stmt*> chosen =
        needed_prims(prims, plan, targets, [&](const Stmt& p) { return !second && post_prims.count(&p) > 0; }, &need);
    std::ostringstream o;
    for (const auto& p : inputs) {
      if (!need.count(p.get()) || plan.view_only.count(p.get())) continue;
      std::string ref = vec && full_in(p) ? name_of(p) + "_v[k]" : "p_" + name_of(p) + "[" + offset_expr(p->type.shape, S, ix) + "]";
      o << ind << "const " << reg_name(reg_of(p->type.dtype)) << " " << name_of(p) << " = " << load_expr(p->type.dtype, ref) << ";\n";
    }
    for (const Stmt* p : prims) {
      const ir::ProxyPtr& q = p->outputs[0];
      auto v = plan.views.find(q.get());
      if (v == plan.views.end() || !need.count(q.get())) continue;
      const std::string ref = vec && in_list(vec_views, q.get())
                                  ? name_of(q) + "_v[k]"
                                  : "p_" + name_of(input_ptr(v->second.base)) + "[" + view_offset_expr(v->second, S, ix) + "]";
      o << ind << "const " << reg_name(reg_of(q->type.dtype)) << " " << name_of(q) << " = " << load_expr(q->type.dtype, ref) << ";\n";
    }
    if (vec) {  // cats read a run at a time: their registers from the run, not their expression
      std::vector<const Stmt*> rest;
      for (const Stmt* p : chosen) {
        const ir::ProxyPtr& q = p->outputs[0];
        if (!in_list(vec_cats, q.get())) {
          rest.push_back(p);
          continue;
        }
        o << ind << "const " << reg_name(reg_of(q->type.dtype)) << " " << name_of(q) << " = " << load_expr(q->type.dtype, name_of(q) + "_v[k]")
          << ";  // " << (canonical ? name_of(q) : q->name) << " = prims.cat\n";
      }
      chosen = rest;
    }
    o << prim_lines(chosen, plan, S, ix, canonical, name_of, [&](const ir::Proxy* b) { return "p_" + name_of(input_ptr(b)); }, ind);
    return o.str();
  };

  std::ostringstream params;
  for (const auto& p : k.params)
    params << (p.output ? "" : "const ") << storage_name(p.type.dtype) << (p.may_alias ? "* p_" : "* __restrict__ p_") << name_of(p.proxy) << ", ";
  params << "double* __restrict__ tr_partial, int vec_ok";
  const size_t nr = reductions.size();
  k.column_reductions = static_cast<int>(nr);
  // A kernel's entry, its block indices and a shared array of nr x 256 doubles, or the same as a
  // segment's parameters.
  const std::string bx = segment ? "tr_bx" : "blockIdx.x", by = segment ? "tr_by" : "blockIdx.y";
  auto entry = [&](const std::string& fn) {
    return segment ? "__device__ __forceinline__ void " + fn + "(" + params.str() + ", const unsigned tr_bx, const unsigned tr_by, double* tr_shm)"
                   : "extern \"C\" __global__ void __launch_bounds__(" + std::string(cs.wave && cs.two_per_sm && fn == name ? "256, 2" : "256") + ") " + fn + "(" +
                         params.str() + ")";
  };
  auto shared = [&](const std::string& arr) {
    const std::string n = std::to_string(nr);
    return segment ? "  double (*" + arr + ")[256] = reinterpret_cast<double (*)[256]>(tr_shm);\n" : "  __shared__ double " + arr + "[" + n + "][256];\n";
  };
  std::ostringstream body;
  if (!canonical) body << "// " << k.origin << "\n";
  // The pass over the rows.
  body << entry(name) << " {\n";
  body << "  const long long tr_C = " << cs.C << "LL, tr_R = " << cs.R << "LL;\n";
  body << "  const int tr_tx = threadIdx.x % " << cs.Ct << ", tr_ty = threadIdx.x / " << cs.Ct << ";\n";
  body << "  const long long tr_s = (long long)" << bx << " * " << cs.Ct << " + tr_tx;  // the thread's " << V << " columns from tr_s * " << V << "\n";
  body << "  const long long tr_r0 = (long long)" << by << " * " << cs.rows << "LL;\n";
  body << "  const long long tr_r1 = tr_r0 + " << cs.rows << "LL < tr_R ? tr_r0 + " << cs.rows << "LL : tr_R;\n";
  for (size_t j = 0; j < nr; ++j) {
    body << "  double tr_a" << j << "[" << V << "];\n";
    body << "  for (int k = 0; k < " << V << "; ++k) tr_a" << j << "[k] = " << acc_init(reductions[j]->op->name) << ";\n";
  }
  auto element = [&](const std::string& ind, bool vec) {
    std::ostringstream e;
    e << ind << "const long long tr_c = tr_s * " << V << " + k, i = tr_r * tr_C + tr_c;\n";
    e << value_lines(targets, ind, false, vec);
    for (size_t j = 0; j < nr; ++j) {
      const bool f32 = reg_of(reductions[j]->args[0].proxy->type.dtype) == Reg::f32;
      const std::string acc = (f32 ? "tr_p" : "tr_a") + std::to_string(j) + "[k]";
      e << ind << acc << " = " << acc_step(reductions[j]->op->name, acc, (f32 ? "" : "(double)") + name_of(reductions[j]->args[0].proxy)) << ";\n";
    }
    for (const auto& o : full_outs) {
      if (vec) e << ind << name_of(o) << "_o[k] = " << store_expr(o->type.dtype, name_of(o), true) << ";\n";
      else e << ind << "p_" << name_of(o) << "[i] = " << store_expr(o->type.dtype, name_of(o), true) << ";\n";
    }
    return e.str();
  };
  // The loop over the thread's rows sits inside each path. The vector one takes kBatch rows at a
  // time: every load of the batch first, then the batch's values, sums and stores. The loads are
  // in flight together even where an output may be written over an input (no __restrict__: the
  // compiler kept each row's loads behind the previous row's stores, and a [8192, 3072] GELU
  // backward with its bias gradient ran at 2.2 TB/s on the H200). Each thread reads and writes
  // only its own elements, each read before its write, so the batch is safe in place.
  constexpr int kBatch = 4;
  const std::string Vs = std::to_string(V), Bs = std::to_string(kBatch), Lys = std::to_string(cs.Ly);
  // f32 values reduce over a batch's rows in f32 (tr_pJ), then one conversion and one double
  // operation per batch and column (the conversions run at a quarter of the f32 rate). Every path
  // (vector, scalar) takes the same batches, so the numbers do not depend on alignment.
  auto batch_init = [&](const std::string& ind) {
    std::ostringstream o;
    for (size_t j = 0; j < nr; ++j) {
      if (reg_of(reductions[j]->args[0].proxy->type.dtype) != Reg::f32) continue;
      const std::string& op = reductions[j]->op->name;
      o << ind << "float tr_p" << j << "[" << Vs << "];\n" << ind << "for (int k = 0; k < " << Vs << "; ++k) tr_p" << j << "[k] = "
        << (op == "sum" ? "0.f" : op == "amax" ? "(-__int_as_float(0x7f800000))" : "__int_as_float(0x7f800000)") << ";\n";
    }
    return o.str();
  };
  auto batch_merge = [&](const std::string& ind) {
    std::ostringstream o;
    for (size_t j = 0; j < nr; ++j) {
      if (reg_of(reductions[j]->args[0].proxy->type.dtype) != Reg::f32) continue;
      const std::string acc = "tr_a" + std::to_string(j) + "[k]";
      o << ind << "for (int k = 0; k < " << Vs << "; ++k) " << acc << " = "
        << acc_step(reductions[j]->op->name, acc, "(double)tr_p" + std::to_string(j) + "[k]") << ";\n";
    }
    return o.str();
  };
  const std::string batch_loop = "for (long long tr_rb = tr_r0 + tr_ty; tr_rb < tr_r1; tr_rb += " + std::to_string(kBatch * cs.Ly) + "LL) {\n";
  auto batch_row = [&](const std::string& ind) {
    return ind + "const long long tr_r = tr_rb + tr_u * " + Lys + "LL;\n" + ind + "if (tr_r < tr_r1) {\n";
  };
  body << "  if (tr_s * " << V << " < tr_C) {\n";
  if (V > 1) {
    body << "    if (vec_ok) {\n      " << batch_loop;
    // The batch's registers: NAME_b[u] holds row tr_rb + u * Ly's V elements.
    std::vector<std::pair<std::string, std::string>> batch;  // name, storage type
    for (const auto& p : inputs)
      if (full_in(p)) batch.push_back({name_of(p), storage_name(p->type.dtype)});
    for (const Stmt* p : vec_views) batch.push_back({name_of(p->outputs[0]), storage_name(p->outputs[0]->type.dtype)});
    for (const Stmt* p : vec_cats) batch.push_back({name_of(p->outputs[0]), storage_name(p->outputs[0]->type.dtype)});
    for (const auto& [n, t] : batch) body << "        __align__(16) " << t << " " << n << "_b[" << Bs << "][" << Vs << "];\n";
    body << batch_init("        ");
    // Where nothing may alias (every pointer __restrict__), one loop over the batch: the compiler
    // hoists every load of the unrolled batch itself, with the per-row loads of broadcast inputs
    // too (split, a [8192, 768] norm-weight gradient waited on those after the batch's loads:
    // 0.026 -> 0.036 ms).
    bool split = false;
    for (const auto& kp : k.params) split = split || kp.may_alias;
    body << "        #pragma unroll\n        for (int tr_u = 0; tr_u < " << Bs << "; ++tr_u) {\n";
    body << "          const long long tr_r = tr_rb + tr_u * " << Lys << "LL;\n          if (tr_r < tr_r1) {\n";
    body << "            const long long tr_v = tr_r * tr_C + tr_s * " << V << ";\n            (void)tr_v;\n";
    for (const auto& p : inputs) {
      if (!full_in(p)) continue;
      std::string t = storage_name(p->type.dtype);
      body << "            tr_copy<" << V << " * sizeof(" << t << ")>(" << name_of(p) << "_b[tr_u], p_" << name_of(p) << " + tr_v);\n";
    }
    // Runs of views and cats: the offset of the run's first element (tr_c and i at k = 0).
    auto run_copy = [&](const ir::View& v, const std::string& dst, int64_t dim, int64_t shift, DType dt) {
      return "tr_copy<" + std::to_string(V) + " * sizeof(" + storage_name(dt) + ")>(" + dst + ", p_" + name_of(input_ptr(v.base)) + " + (" +
             view_offset_expr(v, S, rows_ix, dim, shift) + "))";
    };
    for (const Stmt* p : vec_views) {
      const ir::ProxyPtr& q = p->outputs[0];
      body << "            { const long long tr_c = tr_s * " << V << ", i = tr_r * tr_C + tr_c; "
           << run_copy(plan.views.at(q.get()), name_of(q) + "_b[tr_u]", -1, 0, q->type.dtype) << "; }\n";
    }
    for (const Stmt* p : vec_cats) {
      const ir::ProxyPtr& q = p->outputs[0];
      const ir::CatPlan& c = plan.cats.at(q.get());
      const std::string t = storage_name(q->type.dtype);
      std::vector<int64_t> ostride(S.size(), 1);
      for (size_t d = S.size(); d-- > 1;) ostride[d - 1] = ostride[d] * S[d];
      body << "            { const long long tr_c = tr_s * " << V << ", i = tr_r * tr_C + tr_c; const long long tr_cc = "
           << index_coord(ostride[c.dim], c.dim > 0 ? S[c.dim] : 0, rows_ix) << ";\n";
      // The piece's address chosen first, then one copy: one load whichever piece holds the run.
      body << "              const " << t << "* tr_src = ";
      for (size_t j = 0; j < c.pieces.size(); ++j) {
        const ir::View& v = c.pieces[j];
        const std::string at = "p_" + name_of(input_ptr(v.base)) + " + (" + view_offset_expr(v, S, rows_ix, static_cast<int64_t>(c.dim), c.bounds[j]) + ")";
        body << (j + 1 < c.pieces.size() ? "tr_cc < " + std::to_string(c.bounds[j + 1]) + "LL ? " + at + "\n                : " : at + ";\n");
      }
      body << "              tr_copy<" << V << " * sizeof(" << t << ")>(" << name_of(q) << "_b[tr_u], tr_src);\n            }\n";
    }
    if (split) {
      // The batch's rows in order: the same order of additions as one row at a time.
      body << "          }\n        }\n";
      body << "        #pragma unroll\n        for (int tr_u = 0; tr_u < " << Bs << "; ++tr_u) {\n";
      body << "          const long long tr_r = tr_rb + tr_u * " << Lys << "LL;\n          if (tr_r < tr_r1) {\n";
      body << "            const long long tr_v = tr_r * tr_C + tr_s * " << V << ";\n            (void)tr_v;\n";
    }
    for (const auto& [n, t] : batch) body << "            const " << t << " (&" << n << "_v)[" << Vs << "] = " << n << "_b[tr_u];\n";
    for (const auto& o : full_outs)
      body << "            __align__(16) " << storage_name(o->type.dtype) << " " << name_of(o) << "_o[" << V << "];\n";
    body << "            #pragma unroll\n            for (int k = 0; k < " << V << "; ++k) {\n";
    body << element("              ", true);
    body << "            }\n";
    for (const auto& o : full_outs)
      body << "            tr_copy<" << V << " * sizeof(" << storage_name(o->type.dtype) << ")>(p_" << name_of(o) << " + tr_v, " << name_of(o) << "_o);\n";
    body << "          }\n        }\n" << batch_merge("        ");
    body << "      }\n    } else {\n      " << batch_loop << batch_init("        ");
    body << "        for (int tr_u = 0; tr_u < " << Bs << "; ++tr_u) {\n" << batch_row("          ");
    body << "            for (int k = 0; k < " << V << "; ++k) {\n" << element("              ", false) << "            }\n";
    body << "          }\n        }\n" << batch_merge("        ") << "      }\n    }\n";
  } else {
    body << "    " << batch_loop << batch_init("      ");
    body << "      for (int tr_u = 0; tr_u < " << Bs << "; ++tr_u) {\n" << batch_row("        ");
    body << "          const int k = 0;\n" << element("          ", false) << "        }\n      }\n" << batch_merge("      ") << "    }\n";
  }
  body << "  }\n";
  // A folded kernel's fixed-order tree over its block's 256 threads: arr[j][0] becomes the
  // combination of arr[j][0..255] for each reduction j.
  auto block_tree = [&](const std::string& arr) {
    std::ostringstream o;
    o << "  __syncthreads();\n  for (int w = 128; w > 0; w >>= 1) {\n    if (threadIdx.x < w) {\n";
    for (size_t j = 0; j < nr; ++j) {
      const std::string at = arr + "[" + std::to_string(j) + "][threadIdx.x";
      o << "      " << at << "] = " << acc_step(reductions[j]->op->name, at + "]", at + " + w]") << ";\n";
    }
    o << "    }\n    __syncthreads();\n  }\n";
    return o.str();
  };
  if (nr > 0 && fold) {
    // Folded: each thread's V columns in order, then a tree over the block's threads (a fixed
    // order), one partial per block and reduction. (Threads past the columns hold the initial
    // value, which changes no sum, maximum or minimum.)
    body << shared("tr_part");
    for (size_t j = 0; j < nr; ++j) {
      const std::string& op = reductions[j]->op->name;
      body << "  {\n    double a = tr_a" << j << "[0];\n";
      body << "    for (int k = 1; k < " << V << "; ++k) a = " << acc_step(op, "a", "tr_a" + std::to_string(j) + "[k]") << ";\n";
      body << "    tr_part[" << j << "][threadIdx.x] = a;\n  }\n";
    }
    body << block_tree("tr_part");
    body << "  if (threadIdx.x == 0) {\n";
    for (size_t j = 0; j < nr; ++j)
      body << "    tr_partial[((long long)" << by << " * " << gx << " + " << bx << ") * " << nr << " + " << j << "] = tr_part[" << j << "][0];\n";
    body << "  }\n";
  } else if (nr > 0) {
    // Each of the thread's columns in turn: the lanes of rows combine in a fixed order.
    body << shared("tr_part");
    body << "  for (int k = 0; k < " << V << "; ++k) {\n";
    for (size_t j = 0; j < nr; ++j) body << "    tr_part[" << j << "][threadIdx.x] = tr_a" << j << "[k];\n";
    body << "    __syncthreads();\n";
    body << "    const long long tr_c = tr_s * " << V << " + k;\n";
    body << "    if (tr_ty == 0 && tr_c < tr_C) {\n";
    for (size_t j = 0; j < nr; ++j) {
      const std::string& op = reductions[j]->op->name;
      body << "      {\n        double a = tr_part[" << j << "][tr_tx];\n";
      body << "        for (int l = 1; l < " << cs.Ly << "; ++l) { const double v = tr_part[" << j << "][l * " << cs.Ct << " + tr_tx]; a = "
           << acc_step(op, "a", "v") << "; }\n";
      body << "        tr_partial[((long long)" << by << " * " << nr << " + " << j << ") * tr_C + tr_c] = a;\n      }\n";
    }
    body << "    }\n    __syncthreads();\n  }\n";
  }
  body << "}\n\n";
  // The reduced values rounded to their dtypes (a_j: the double accumulator of reduction j), the
  // values computed from them, and the per-column outputs, at column tr_c.
  std::vector<ir::ProxyPtr> post_outs;
  for (const auto& o : s.outputs)
    if (post.count(o.get())) post_outs.push_back(o);
  auto finish = [&](const std::string& ind) {
    std::ostringstream o;
    o << ind << "const long long i = tr_c;\n";
    for (size_t j = 0; j < nr; ++j) {
      const ir::ProxyPtr& y = reductions[j]->outputs[0];
      const std::string a = "tr_a" + std::to_string(j);
      DType od = y->type.dtype;
      std::string val = od == DType::f64 ? a : od == DType::bf16 ? "tr_round_bf16((float)" + a + ")"
                        : od == DType::f16 ? "tr_round_f16((float)" + a + ")" : "(float)" + a;
      o << ind << "const " << reg_name(reg_of(od)) << " " << name_of(y) << " = " << val << ";\n";
    }
    o << value_lines(post_outs, ind, true);
    for (const auto& q : post_outs) o << ind << "p_" << name_of(q) << "[tr_c] = " << store_expr(q->type.dtype, name_of(q), true) << ";\n";
    return o.str();
  };
  body << entry(name + "_2") << " {\n";
  if (fold) {
    // Folded: one block; thread t adds partials t, t + 256, ... in order, then a tree (fixed).
    const int64_t Q = cs.chunks * gx;
    if (nr > 0) body << shared("tr_lane");
    for (size_t j = 0; j < nr; ++j) {
      const std::string& op = reductions[j]->op->name;
      body << "  {\n    double a = " << acc_init(op) << ";\n";
      body << "    for (long long q = threadIdx.x; q < " << Q << "LL; q += 256) { const double v = tr_partial[q * " << nr << " + " << j
           << "]; a = " << acc_step(op, "a", "v") << "; }\n";
      body << "    tr_lane[" << j << "][threadIdx.x] = a;\n  }\n";
    }
    if (nr > 0) {
      body << block_tree("tr_lane");
    }
    body << "  if (threadIdx.x == 0) {\n    const long long tr_c = 0;\n";
    for (size_t j = 0; j < nr; ++j) body << "    const double tr_a" << j << " = tr_lane[" << j << "][0];\n";
    body << finish("    ") << "  }\n}\n";
  } else {
    // The combination of the chunks, then the values per column. A block takes 32 columns and 8
    // lanes of chunks (lane l adds chunks l, l + 8, ... in order); lane 0 adds the 8 lane sums in
    // lane order: a fixed order, so the same numbers on every run. (One thread per column adding
    // every chunk in turn put a [8192, 768] group's second kernel on 3 blocks of the whole GPU.)
    body << "  const long long tr_C = " << cs.C << "LL;\n";
    body << "  const int tr_tx = threadIdx.x % 32, tr_ty = threadIdx.x / 32;\n";
    body << "  const long long tr_c = (long long)" << bx << " * 32 + tr_tx;\n";
    if (nr > 0) body << shared("tr_lane");
    for (size_t j = 0; j < nr; ++j) {
      const std::string& op = reductions[j]->op->name;
      const std::string a = "tr_a" + std::to_string(j);
      body << "  double " << a << " = " << acc_init(op) << ";\n";
      body << "  if (tr_c < tr_C)\n    for (long long q = tr_ty; q < " << cs.chunks << "LL; q += 8) { const double v = tr_partial[(q * " << nr << " + "
           << j << ") * tr_C + tr_c]; " << a << " = " << acc_step(op, a, "v") << "; }\n";
      body << "  tr_lane[" << j << "][threadIdx.x] = " << a << ";\n";
    }
    body << "  __syncthreads();\n";
    body << "  if (tr_ty == 0 && tr_c < tr_C) {\n";
    for (size_t j = 0; j < nr; ++j) {
      const std::string& op = reductions[j]->op->name;
      const std::string a = "tr_a" + std::to_string(j);
      body << "    for (int l = 1; l < 8; ++l) { const double v = tr_lane[" << j << "][l * 32 + tr_tx]; " << a << " = " << acc_step(op, a, "v") << "; }\n";
    }
    body << finish("    ") << "  }\n}\n";
  }
  k.source = segment ? body.str() : std::string(cuda_prelude()) + "\n" + body.str();
  return k;
}

// The horizontal kernels' text: each member's two kernels as segments, then two entries whose
// blocks are dealt out to the members in order (generate_columns_multi).
Kernel generate_columns_multi_text(const std::vector<const Stmt*>& stmts, const std::string& name, bool canonical) {
  Kernel k;
  k.name = name;
  k.columns = true;
  std::ostringstream src, w1, w2, calls1, calls2;
  src << cuda_prelude() << "\n";
  w1 << "extern \"C\" __global__ void __launch_bounds__(256) " << name << "(";
  w2 << "extern \"C\" __global__ void __launch_bounds__(256) " << name << "_2(";
  long long start = 0, start2 = 0;
  int64_t partial = 0;
  int max_nr = 1;
  size_t param = 0;
  for (size_t j = 0; j < stmts.size(); ++j) {
    const std::string seg = name + "_s" + std::to_string(j);
    Kernel m = generate_columns_kernel(*stmts[j], seg, canonical, {}, true);
    src << m.source << "\n";
    const int64_t per_block = m.column_block * std::max(1, m.vector_width);
    const long long gx = (m.row_length + per_block - 1) / per_block;
    const long long blocks = gx * m.column_chunks;
    const long long blocks2 = m.column_fold ? 1 : std::max<long long>(1, (m.row_length + 31) / 32);
    std::ostringstream args;
    for (size_t q = 0; q < m.params.size(); ++q) {
      const KernelParam& kp = m.params[q];
      const std::string decl = std::string(kp.output ? "" : "const ") + storage_name(kp.type.dtype) + "* a" + std::to_string(param);
      w1 << (param ? ", " : "") << decl;
      w2 << (param ? ", " : "") << decl;
      args << "a" << param << ", ";
      ++param;
    }
    args << "tr_partial + " << partial << "LL, (int)((vec_mask >> " << j << ") & 1ULL), ";
    calls1 << "  " << (j ? "else " : "") << "if (b < " << start + blocks << "u) { const unsigned l = b - " << start << "u; " << seg << "("
           << args.str() << "l % " << gx << "u, l / " << gx << "u, tr_shm); }\n";
    calls2 << "  " << (j ? "else " : "") << "if (b < " << start2 + blocks2 << "u) " << seg << "_2(" << args.str() << "b - " << start2
           << "u, 0u, tr_shm);\n";
    start += blocks;
    start2 += blocks2;
    max_nr = std::max(max_nr, m.column_reductions);
    k.params.insert(k.params.end(), m.params.begin(), m.params.end());
    k.segment_params.push_back(static_cast<int>(m.params.size()));
    k.segment_blocks.push_back(blocks);
    k.segment_elements.push_back(m.elements);
    k.segment_partials.push_back(m.partials);
    k.elements += m.elements;
    partial += std::max<int64_t>(m.partials, 1);
    if (!canonical) k.origin += (j ? "\n" : "") + m.origin;
  }
  const std::string tail = ", double* __restrict__ tr_partial, unsigned long long vec_mask) {\n  __shared__ double tr_shm[" +
                           std::to_string(max_nr * 256) + "];\n  const unsigned b = blockIdx.x;\n";
  k.source = src.str() + w1.str() + tail + calls1.str() + "}\n" + w2.str() + tail + calls2.str() + "}\n";
  k.blocks = start;
  k.blocks2 = start2;
  k.partials = partial;
  return k;
}

}  // namespace

bool is_column_group(const Stmt& s, std::string* why) {
  if (s.kind == ir::StmtKind::Del) {
    if (why) *why = "a del";
    return false;
  }
  ir::GroupPlan g = ir::plan_group(s);
  if (g.kind == ir::GroupKind::Columns) return true;
  if (why) *why = g.kind == ir::GroupKind::None ? g.why : "no reduction over columns";
  return false;
}

bool is_horizontal_column_member(const Stmt& s, std::string* why) {
  if (!is_column_group(s, why)) return false;
  // Every output derived from the reduced values (none of the full shape): outputs take no
  // input's buffer, and the members share no memory.
  ir::GroupPlan plan = ir::plan_group(s);
  for (const auto& o : s.outputs)
    if (o->type.shape == plan.shape && rt::numel(o->type.shape) > 1) {
      if (why) *why = "an output of the full shape";
      return false;
    }
  Kernel k = generate_columns_kernel(s, "m", true, {}, true);
  if (k.column_reductions > 24) {  // (the shared array: 24 x 256 doubles, 48 KiB at most)
    if (why) *why = "more than 24 reductions";
    return false;
  }
  return true;
}

Kernel generate_columns_multi(const std::vector<const Stmt*>& stmts, const std::string& name) {
  if (stmts.empty() || stmts.size() > 64) throw std::invalid_argument("codegen: a horizontal column kernel takes 1 to 64 groups");
  for (const Stmt* s : stmts) {
    std::string why;
    if (!is_horizontal_column_member(*s, &why))
      throw std::invalid_argument("codegen: '" + ir::print_stmt_line(*s) + "' cannot be a horizontal column kernel's member: " + why);
  }
  Kernel k = generate_columns_multi_text(stmts, name, false);
  Kernel c = generate_columns_multi_text(stmts, "tr_kernel", true);
  k.symbol = name_by_hash(c.source);
  k.symbol2 = k.symbol + "_2";
  k.structure = std::move(c.source);
  return k;
}

Kernel generate_columns(const Stmt& s, const std::string& name, const std::unordered_set<const ir::Proxy*>& may_alias) {
  Kernel k = generate_columns_kernel(s, name, false, may_alias);
  Kernel c = generate_columns_kernel(s, "tr_kernel", true, may_alias);
  k.symbol = name_by_hash(c.source);
  k.symbol2 = k.symbol + "_2";
  k.structure = std::move(c.source);
  return k;
}

}  // namespace tracer::codegen
