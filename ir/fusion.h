// Fused execution of elementwise and row groups on the CPU: a composite or fusion statement made
// of elementwise primitives (and reductions over the last dimension) runs in blocks of rows, so
// its intermediates never exist at full size. The executor and the memory estimator both use
// runs_fused() to decide.
#pragma once
#include <unordered_set>
#include <vector>

#include "ir/op.h"
#include "ir/trace.h"

namespace tracer::ir {

// The dimension a fused statement's blocks split: the first of its iteration shape that is not 1
// (a batch of one, [1, 512, 4096], splits its 512 rows; every dimension before it is 1, so a
// block is still one contiguous run of each split tensor). shape.size() when every one is 1.
size_t block_dim(const Shape& shape);
// Whether a value of shape s splits into the blocks of an iteration shape of rank `rank` whose
// block dimension k has `rows` rows: the same rank, ones before k, and `rows` at k.
bool block_split(const Shape& s, size_t rank, size_t k, int64_t rows);

// Whether s runs fused: every primitive in it (recursively) is elementwise or a reduction over
// the last dimension (row_reduction; then the block dimension is not the last, so rows are never
// reduced), and every value it computes either has the full row count of its first output at the
// block dimension (split into blocks) or broadcasts along the rows (kept whole). A block's reductions see whole rows, and
// the CPU reduces each row in the same order whatever the block: results are bit for bit those
// of the unfused statements.
bool runs_fused(const Stmt& s);

// Whether a primitive can be part of a fused group: elementwise, or a stateless random draw
// (uniform_philox, a pure function of the element's index).
bool fusible_prim(const Stmt& p);

// A sum, amax or amin over the last dimension only, keeping it (output [..., 1]), of a float
// tensor: it can run inside a row group (a fusion with elementwise statements over rows of the
// same shape; one GPU block per row). *in_shape gets the reduced tensor's shape.
bool row_reduction(const Stmt& s, Shape* in_shape = nullptr);

// The primitives of s in execution order (composites inside expanded).
void flat_prims(const Stmt& s, std::vector<const Stmt*>& out);

// The proxies that die right after stmts[i]: those the `del` statements immediately following it
// delete (empty when stmts[i] is itself a `del`). Buffer reuse takes its donors from these.
void dying_after(const std::vector<Stmt>& stmts, size_t i, std::unordered_set<const Proxy*>& out);

// The transposes the executor leaves unmaterialized: prims.transpose statements that swap the
// last two dimensions (rank 2 or more, the rest in place) and whose output only prims.matmul
// statements of the same list read (and `del`s delete), not `output`. Such an output shares its
// input's buffer and the matmul reads it transposed (BLAS's transpose flag), as PyTorch's
// transposed views are. The estimator counts them the same way.
std::unordered_set<const Proxy*> lazy_transposes(const std::vector<Stmt>& stmts, const Arg* output);

// Whether s is a transpose of the last two dimensions of its (proxy) input.
bool swaps_last_two(const Stmt& s);
// A fusion of `body`'s arguments: the proxies its statements read that none of them defines, in
// the order of their first reads.
std::vector<Arg> fusion_inputs(const std::vector<Stmt>& body);

}  // namespace tracer::ir
