// Compiled functions as values (docs/language.md, "Compiled functions"): jit(f) and
// value_and_grad(f) return callables that trace f on their arguments' types, run a pass
// pipeline, and run the result; a program is kept per signature, so a loop's later calls
// neither trace nor run passes.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "interpreter/device.h"
#include "interpreter/value.h"
#include "ir/trace.h"

namespace tracer::interp {

class Interpreter;
using Traces = std::vector<std::shared_ptr<ir::Trace>>;

// One signature's program: the traces after the passes, and for value_and_grad which of the
// flattened tensor arguments each differentiated argument holds.
struct CompiledProgram {
  Traces prog;
  std::vector<std::vector<size_t>> grad_leaves;  // per argnum: indices into the flattened tensors
  std::vector<rt::Tensor> captured;  // tensors the function closes over: inputs after the arguments'
  // On a device: the program made ready once (kernels compiled), and the captured tensors there.
  std::unique_ptr<DeviceBackend::Program> device_prog;
  std::vector<rt::cuda::DeviceTensor> captured_dev;
  double trace_ms = 0, pass_ms = 0;
};

struct CompiledObj : Object {
  CompiledObj() : Object(VT::Compiled) {}
  Value fn;                          // the function compiled
  std::string name;                  // its name, for messages
  std::vector<std::string> passes;   // the pipeline (value_and_grad: grad first)
  std::string device = "cpu";        // as given (the default: where the arguments are)
  bool device_given = false;          // device= given: it runs there; else where its arguments are
  DeviceBackend* backend = nullptr;  // device='s, opened when jit was called; null on the CPU
  bool grad = false;                 // value_and_grad: returns (value, gradients)
  std::vector<int64_t> argnums{0};   // the positional arguments differentiated
  bool argnums_tuple = false;        // argnums given as a tuple: the gradients are a tuple too
  bool has_aux = false;              // f returns (loss, aux): value_and_grad returns ((loss, aux), grads)
  std::vector<int64_t> donate;       // positional arguments whose tensors the call may overwrite
  // cuda_graph=True: on a GPU, each program is captured as a CUDA graph at its second call and
  // replayed after (DeviceBackend::Options); its outputs are valid until its next call.
  bool cuda_graph = false;
  std::map<std::string, std::shared_ptr<CompiledProgram>> cache;  // by signature
  std::shared_ptr<CompiledProgram> last;  // the program the last call ran
  // Statistics, read as attributes (f.compiles, ...).
  int64_t calls = 0, compiles = 0;
  size_t key_bytes = 0;  // the longest signature key so far: the next call's key reserves it
  double trace_ms = 0, pass_ms = 0, run_ms = 0;
};

// The builtins jit and value_and_grad.
Value builtin_jit(Interpreter& in, CallArgs& a, SourceLoc loc);
Value builtin_value_and_grad(Interpreter& in, CallArgs& a, SourceLoc loc);
// A call of a compiled function.
Value call_compiled(Interpreter& in, CompiledObj& c, CallArgs args, SourceLoc loc);
// Its attributes: compiles, calls, trace_ms, pass_ms, run_ms, traces (the last program's), cache_size,
// graph_replays and graph_status (cuda_graph=True: the last program's replays, and "off", "warming
// up", "captured" or why it runs without a graph).
bool compiled_attr(const CompiledObj& c, const std::string& name, Value* out);

}  // namespace tracer::interp
