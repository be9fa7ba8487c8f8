// Fused execution of elementwise groups on the CPU: a composite or fusion statement made only of
// elementwise primitives runs in blocks of rows, so its intermediates never exist at full size.
// The executor and the memory estimator both use runs_fused() to decide.
#pragma once
#include <vector>

#include "ir/op.h"
#include "ir/trace.h"

namespace tracer::ir {

// Whether s runs fused: every primitive in it (recursively) is elementwise, and every value
// it computes either has the full row count of its first output (split into blocks) or
// broadcasts along the rows (kept whole).
bool runs_fused(const Stmt& s);

// The primitives of s in execution order (composites inside expanded).
void flat_prims(const Stmt& s, std::vector<const Stmt*>& out);

}  // namespace tracer::ir
