// Fused groups: which statements one kernel can run, and how each value of such a group is read
// at the group's element index (docs/codegen.md, "Groups"). One analysis serves the fuse pass
// (whether a run becomes one kernel), the CPU executor (running a group block by block of rows),
// the memory estimator, and the CUDA generators.
//
// A group iterates over one shape S: an elementwise group over its outputs' shape, a row group
// over the shape its reductions over the last dimension read, a column group over the shape its
// reductions over leading dimensions read. Every value of the group is one of:
//   - aligned: it broadcasts to S as NumPy broadcasts (right-aligned), and element i of the
//     group computes it at i (an elementwise op of aligned values, a constant fill, an iota);
//   - a view: it is read from a group input's buffer through strides (a reshape, broadcast_in_dim,
//     transpose or slice of an input, or of another view): the kernel never materializes it.
// A shape op of a computed (aligned) value belongs to a group only when it changes nothing under
// right-aligned broadcasting (a broadcast to trailing dimensions, a reshape that adds or removes
// leading ones).
#pragma once
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/trace.h"

namespace tracer::ir {

// RowsColumns: a row group whose row-shaped values are also summed over every leading dimension
// (a layer norm's backward: the input gradient per row, the weight and bias gradients per
// column), as one kernel: the rows' pass, with per-column partials.
enum class GroupKind { None, Elementwise, Rows, Columns, RowsColumns };

// A view of a group input: logical dimension k of `shape` is made of sub-dimensions dims[k]
// (outer to inner; their sizes multiply to shape[k]; none for a dimension of size 1), each with
// a stride in elements into the input's contiguous buffer (0: broadcast). Element c of the view
// is at offset + the sum over dimensions and sub-dimensions of ((c_k / inner) % size) * stride,
// inner being the product of the sizes of the finer sub-dimensions of k. A reshape that merges
// dimensions strides cannot express as one (the heads of a transposed attention output) keeps
// them as sub-dimensions. shape broadcasts to the group's shape right-aligned.
struct SubDim {
  int64_t size = 1, stride = 0;
};
struct View {
  const Proxy* base = nullptr;
  Shape shape;
  std::vector<std::vector<SubDim>> dims;
  int64_t offset = 0;
  // Whether it reads its whole base in order (element j of the view is element j of the input:
  // a reshape of it, maybe with leading ones).
  bool contiguous() const;
  // The offset of element `c` (logical coordinates).
  int64_t at(const std::vector<int64_t>& c) const;
};

// A cat of views: element i reads pieces[k] where bounds[k] <= c < bounds[k + 1], c being its
// coordinate along `dim` (of the group's shape). Each piece's view has the cat's shape but
// along dim.
struct CatPlan {
  size_t dim = 0;
  std::vector<int64_t> bounds;
  std::vector<View> pieces;
};

struct GroupPlan {
  GroupKind kind = GroupKind::None;
  std::string why;          // why not a group (kind None)
  Shape shape;              // S, the iteration shape
  // Columns: the leading dimensions reduced (S = [R..., C...] with R the first `lead` dims);
  // RowsColumns: every dimension but the last (rank - 1).
  size_t lead = 0;
  // The group's inputs read as they are (aligned) or through views, in first-use order: the
  // buffers a kernel takes.
  std::vector<ProxyPtr> inputs;
  // The values read through views (their base is an input): no code computes them.
  std::unordered_map<const Proxy*, View> views;
  // Shape statements of computed values that change nothing (identity under broadcasting):
  // their output is their argument's value.
  std::unordered_map<const Proxy*, ProxyPtr> same_as;
  // Inputs read only through views (not broadcastable to S themselves).
  std::unordered_set<const Proxy*> view_only;
  // cats of views (elementwise groups): the value is read from its pieces' inputs.
  std::unordered_map<const Proxy*, CatPlan> cats;
};

// The inputs a kernel of plan g reads only at the element it writes (directly, or through views
// that read them in order: a reshape): their buffers may take an output of their dtype and size
// (buffer reuse). None for a column or rows-and-columns group whose reduced dimensions are all of
// size 1 (its per-column values may read such an input after the rows are written). An input read through any other view (a transpose, a broadcast, a cat's piece)
// is read at other elements than the one written, and lends nothing.
std::unordered_set<const Proxy*> in_order_inputs(const GroupPlan& g);

// Whether p can be part of a group at all: elementwise, a stateless random draw, a reduction
// over the last or the leading dimensions, a view op (reshape, broadcast_in_dim, transpose,
// slice) or a creation (full, iota). Whether a particular group is one kernel is plan_group's.
bool group_prim(const Stmt& p);

// A view op or a creation: no arithmetic of its own. (cat is a group prim but not a layout
// prim: it materializes its value, as an elementwise op does.)
bool layout_prim(const Stmt& p);

// A sum, amax or amin of a float tensor over its leading dimensions 0..k-1 (k <= rank, so a
// reduction of every dimension to one value too; with or without keepdim): the reduction of a
// column group. *in_shape gets the reduced tensor's shape, *lead the number k.
bool column_reduction(const Stmt& s, Shape* in_shape = nullptr, size_t* lead = nullptr);

// The most per-thread column accumulators a RowsColumns group may need: each of its column
// reductions keeps max(ceil(C / 32), ceil(C / 256) * 8) of them a lane (the C columns of a row
// dealt out to a warp's 32 lanes, one at a time or in vectors of up to 8), two for an f64 value. Past this the row and the column reductions are two
// groups (codegen/cuda_rows.cpp: registers, and 48 KiB of shared memory to combine a block's
// warps).
constexpr int64_t kRowsColumnsAccumulators = 96;

// How prims (a group's primitives in order) with these outputs run as one kernel, or why not.
GroupPlan plan_group(const std::vector<const Stmt*>& prims, const std::vector<ProxyPtr>& outputs);
// The same for a fusion or composite statement (or a single primitive).
GroupPlan plan_group(const Stmt& s);

// The element offset into a view for flat index i of the group shape `S`, as integer
// arithmetic on i: offset + sum(((i / div) % mod) * stride) over the terms (mod 0: none).
// With `dim` set, coordinate `dim` of S is taken less `shift` (a cat's piece): those terms are
// ((((i / sdiv) % smod) - shift) / div) % mod (sdiv, smod: the coordinate's own).
struct OffsetTerm {
  int64_t div = 1, mod = 0, stride = 0;
  bool shifted = false;
};
std::vector<OffsetTerm> view_terms(const View& v, const Shape& S, int64_t dim = -1);

}  // namespace tracer::ir
