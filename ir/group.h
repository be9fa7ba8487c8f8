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

enum class GroupKind { None, Elementwise, Rows, Columns };

// A view of a group input: element (c_0, ..., c_{r-1}) of `shape` is element
// offset + sum(c_k * strides[k]) of the input's (contiguous) buffer. shape broadcasts to the
// group's shape right-aligned; a dimension of size 1 or stride 0 is broadcast.
struct View {
  const Proxy* base = nullptr;
  Shape shape;
  std::vector<int64_t> strides;
  int64_t offset = 0;
  // Whether it reads its base in order: shape equal to the base's (up to leading ones),
  // contiguous strides, no offset (the kernel may then vectorize it as the base itself).
  bool contiguous() const;
};

struct GroupPlan {
  GroupKind kind = GroupKind::None;
  std::string why;          // why not a group (kind None)
  Shape shape;              // S, the iteration shape
  // Columns: the leading dimensions reduced (S = [R..., C...] with R the first `lead` dims).
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
};

// Whether p can be part of a group at all: elementwise, a stateless random draw, a reduction
// over the last or the leading dimensions, a view op (reshape, broadcast_in_dim, transpose,
// slice) or a creation (full, iota). Whether a particular group is one kernel is plan_group's.
bool group_prim(const Stmt& p);

// A view op or a creation: no arithmetic of its own (a run made only of these is not fused).
bool layout_prim(const Stmt& p);

// A sum, amax or amin of a float tensor over its leading dimensions 0..k-1 (k < rank; with or
// without keepdim): the reduction of a column group. *in_shape gets the reduced tensor's shape,
// *lead the number k.
bool column_reduction(const Stmt& s, Shape* in_shape = nullptr, size_t* lead = nullptr);

// How prims (a group's primitives in order) with these outputs run as one kernel, or why not.
GroupPlan plan_group(const std::vector<const Stmt*>& prims, const std::vector<ProxyPtr>& outputs);
// The same for a fusion or composite statement (or a single primitive).
GroupPlan plan_group(const Stmt& s);

// The element offset into a view for flat index i of the group shape `S`, as integer arithmetic
// on i: a list of (divisor, modulus, stride) terms, offset + sum(((i / div) % mod) * stride).
struct OffsetTerm {
  int64_t div = 1, mod = 0, stride = 0;  // mod 0: no modulus
};
std::vector<OffsetTerm> view_terms(const View& v, const Shape& S);

}  // namespace tracer::ir
