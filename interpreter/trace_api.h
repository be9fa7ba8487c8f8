// The trace API that passes written in the language use (see docs/passes.md).
#pragma once
#include <string>
#include <vector>

#include "interpreter/value.h"

namespace tracer::interp {

class Interpreter;

// Attributes of traces (name, inputs, statements, output, provenance), statements (kind, op,
// callee, op_kind, args, kwargs, outputs, subsymbols, region, region_id, deleted) and proxy.nbytes.
bool trace_attr(Interpreter& in, const Value& obj, const std::string& name, Value* out);
const BuiltinDef* trace_method(const std::string& name);  // t.add_input, t.set_output, ...
std::vector<const BuiltinDef*> trace_builtins();          // new_trace, recording, emit, ...

}  // namespace tracer::interp
