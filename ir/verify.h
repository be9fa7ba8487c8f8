// The IR verifier and the CPU executor of traces.
#pragma once
#include <string>
#include <vector>

#include "ir/op.h"
#include "ir/trace.h"

namespace tracer::ir {

struct VerifyError {
  std::string message;
  SourceLoc loc;
  std::string stmt;  // the printed statement at fault, if any
};

// Checks that each name is defined once, used only after its definition and before its del, and
// that every primitive's recorded output types agree with its shape/dtype rule.
std::vector<VerifyError> verify(const Trace& t);

// Thrown by execute() for a failing statement.
struct ExecError {
  std::string message;
  SourceLoc loc;
  std::string stmt;
  // The composites the failing statement was recorded inside (Stmt::inlined_at), innermost
  // first. A report names the user's call first and the library's line as a note.
  std::vector<std::pair<SourceLoc, std::string>> within = {};
};

// The ExecError for statement s failing with `what`: the op's name prefixed unless the message
// names it already ("take: index 5 out of range"), the statement printed, the composites it
// was recorded in kept (both executors use it).
ExecError exec_error(const Stmt& s, const std::string& what);

// Runs t on the CPU backend. inputs are moved in so that "del x" frees them.
Arg execute(const Trace& t, std::vector<rt::Tensor> inputs, ExecContext& ctx);

// Runs the backward of a (forward, backward) program made by grad, given the forward's result
// fw_out = (output, saved): the saved tensors move in (fw_out's saved items are left empty), a
// backward input that is one of the output's tensors is shared, every other input (the loss's
// cotangent) is ones. Returns the backward's output (one gradient per forward input, or None).
Arg execute_backward(const Trace& fw, const Trace& bw, Arg& fw_out, ExecContext& ctx);

}  // namespace tracer::ir
