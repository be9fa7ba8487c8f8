// Primitive op declarations: one table holds each op's name, parameters, fusion kind, shape and
// dtype rule, CPU kernel and doc. Every other table is derived from it.
#pragma once
#include <functional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/trace.h"
#include "runtime/comm.h"
#include "runtime/kernels.h"

namespace tracer::rt::dist {
class Communicator;
class DeviceCommunicator;
}

namespace tracer::ir {

// How codegen may group an op (see DESIGN section 4).
enum class OpKind { Elementwise, Shape, Reduction, Matmul, Random, Creation, Gather, Other };

struct ParamSpec {
  std::string name;
  bool required = true;
  Arg default_value;   // when !required
  bool kw_only = false;  // printed as name=value (and only when not the default)
};

// Thrown by meta functions and kernels for argument errors; the caller adds the op name and
// source location.
struct OpError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Runtime state a kernel may need: the allocator that counts bytes, and the stateful RNG.
struct ExecContext {
  rt::Allocator* allocator = nullptr;
  uint64_t seed = 0;
  uint64_t rng_offset = 0;  // advanced by each stateful uniform
  // For an elementwise primitive: a buffer its output may take (see rt::binary), set by the
  // executor when an argument dies at this statement. Null otherwise.
  rt::Tensor* reuse = nullptr;
  // For matmul: the operand's tensor is stored as the transpose of its last two dimensions (a
  // transpose the executor did not materialize; see lazy_transposes in ir/fusion.h).
  bool matmul_transposed[2] = {false, false};
  // The job's communicator for collectives over more than one rank (opened on first use by the
  // host; unset outside a job, where only groups of one rank run).
  std::function<rt::dist::Communicator*()> communicator;
  // A subgroup's communicator (its ranks in its order; this rank among them), opened by the host
  // at the group's first collective and kept for the job.
  std::function<rt::dist::Communicator*(const std::vector<int64_t>& ranks)> group_communicator;
  // The same for CUDA tensors (NCCL), for the GPU executor; in a job it serves every group the
  // job's size, that of one rank included (the same code path as many).
  std::function<rt::dist::DeviceCommunicator*()> device_communicator;
  // The inputs of asynchronous collectives not yet waited on, by their FUTURE: a collective
  // reads its input until it completes (NCCL on the GPU), so every executor keeps it until the
  // wait, and the memory estimate counts it so (ir/memory.cpp).
  std::unordered_map<const Proxy*, rt::Tensor> in_flight;
  // The CPU's asynchronous collectives not yet waited on (submitted to the communicator's
  // thread), by the data of their output tensor: wait blocks on it. A run waits for any left.
  // Its scratch tensors (a gather along a dimension other than 0 moves it to the front) go at
  // the wait too, so the peak does not depend on when the collective happened to finish.
  struct Pending {
    rt::dist::Work work;
    std::vector<rt::Tensor> keep;
  };
  std::unordered_map<const void*, Pending> pending;
  // Waits for every pending collective (the first error is thrown after all are done).
  void finish_pending();
};

// Whether s is an asynchronous collective (all_gather, reduce_scatter, all_reduce or broadcast
// with do_async): its input is read until the wait of its FUTURE output.
bool async_collective(const Stmt& s);

// Functions, not pointers: an embedding host's ops (OpDecl::ns "native") are closures over its
// callbacks.
using MetaFn = std::function<std::vector<TensorType>(const std::vector<Arg>& args)>;
using CpuFn = std::function<std::vector<rt::Tensor>(const std::vector<Arg>& args, ExecContext& ctx)>;

struct OpDecl {
  std::string name;
  OpKind kind;
  std::vector<ParamSpec> params;
  MetaFn meta;
  CpuFn cpu;
  std::string doc;
  std::vector<std::string> aliases;  // other names under prims. (e.g. "cast")
  std::string ns = "prims";          // printed as ns.name: "prims", or "native" for a host's op
  std::string signature;             // a host op's documented signature
};

// The table of primitives (in declaration order).
const std::vector<OpDecl>& all_ops();
const OpDecl* find_op(const std::string& name);

// Binds positional and keyword arguments to op's parameters; throws OpError naming the
// op and the argument on a wrong count or an unknown keyword.
std::vector<Arg> bind_args(const OpDecl& op, std::vector<Arg> positional,
                           std::vector<std::pair<std::string, Arg>> keywords);

// Runs the meta function; throws OpError prefixed with the op name.
std::vector<TensorType> infer(const OpDecl& op, const std::vector<Arg>& bound);

}  // namespace tracer::ir
