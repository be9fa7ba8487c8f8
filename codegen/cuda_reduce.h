// Generated kernels for what is not an elementwise group but still runs on the GPU: reductions
// along a contiguous run of dimensions (sum, prod, amax, amin; floats accumulate in double and
// integers in 64 bits, as the CPU backend does) and broadcast_in_dim. The source depends only on
// the dtypes, the operation and the sizes, so its hash is its cache key.
#pragma once
#include <string>
#include <vector>

#include "ir/trace.h"
#include "runtime/kernels.h"

namespace tracer::codegen {

struct SimpleKernel {
  std::string symbol;  // tr_<hash of the source>
  std::string source;
  long long threads = 0;  // threads to launch in all (grid-stride loops take any count)
  unsigned block = 256;
  // A long reduction runs in two stages: `symbol` writes `partials` doubles (or 64-bit integers),
  // then `symbol2` (threads2 threads) reduces them into the output. Empty symbol2: one stage.
  std::string symbol2;
  long long threads2 = 0;
  long long partials = 0;
  // Tensor inputs, in argument order (a cat's list flattened; empty inputs of a cat left out);
  // the output follows them. Reductions and broadcasts read one.
  size_t inputs = 1;
  // take and take_backward: the kernel's last parameter is the executor's index-error buffer
  // (unsigned long long[3]), checked after the run.
  bool checks_index = false;
  size_t accumulator_bytes = 8;  // bytes per partial (two-stage kernels)
  // take_backward: five kernels symbol, symbol_2 ... symbol_5 over (grad, index, work, y, err),
  // work being `partials` ints (generate_take_backward).
  int stages = 0;
  // sort: one block a line (threads = the lines), `shared_bytes` of dynamic shared memory, two
  // outputs (the values, then their positions as i64).
  bool sorts = false;
  unsigned shared_bytes = 0;
};

// prims.sort as a bitonic sort of each line in shared memory (lines of up to 4096 elements;
// longer ones return false and run on the host).
bool generate_sort(const ir::Stmt& s, SimpleKernel* k, std::string* why);

// The input viewed as [A, R, B], reduced over R (dimensions that are not contiguous go to
// generate_strided_reduction). Returns false (with why) when the op is not a reduction this
// supports or the output is empty.
// sm_count sizes the split of long reductions over the device.
bool generate_reduction(const ir::Stmt& s, SimpleKernel* k, std::string* why, int sm_count = 132);

// out = broadcast_in_dim(a, shape, bdims) as a gather kernel.
bool generate_broadcast(const ir::Stmt& s, SimpleKernel* k, std::string* why);

// A reduction over dimensions that are not contiguous (dims normalised and sorted): one thread
// per output, the reduced elements in order through their strides.
bool generate_strided_reduction(const ir::Stmt& s, const std::vector<int64_t>& dims, SimpleKernel* k, std::string* why);

// transpose, slice and cat as gather kernels (one thread per output element, coalesced writes).
bool generate_layout(const ir::Stmt& s, SimpleKernel* k, std::string* why);

// full and iota (iota in 16-bit floats is left to the CPU).
bool generate_creation(const ir::Stmt& s, SimpleKernel* k, std::string* why);

// take (rows of a table at an index tensor) as a gather; out-of-range indices are reported
// through the error buffer.
bool generate_take(const ir::Stmt& s, SimpleKernel* k, std::string* why);

// take_backward as the CPU computes it, in five kernels: the positions sorted by index (a stable
// counting sort), then one block per row of the output adds its rows of the gradient in index
// order in the math type and converts once: the CPU's numbers, at memory speed.
// accumulate: y holds an addend of the output's type and shape (the next statement's add, run in
// place): each row named by an index becomes y's row plus its sum rounded to the output type, the
// rest are left alone (nothing written), which is take_backward followed by add, bit for bit.
bool generate_take_backward(const ir::Stmt& s, SimpleKernel* k, std::string* why, bool accumulate = false);

// A tensor of type out filled with v (converted as the CPU converts it).
bool generate_fill(const ir::TensorType& out, const rt::Scalar& v, SimpleKernel* k, std::string* why);

// The source of the rng_state kernel (one thread): writes seed = base[0] and
// offset = base[1] + delta, where base holds the generator's state at the start of the run.
std::string rng_state_source(std::string* symbol);
// prims.uniform on the device: the kernel (base, delta, y) draws out's elements in [low, high)
// from the generator's base state advanced by delta offsets (one per earlier draw of the run).
std::string uniform_source(const ir::TensorType& out, double low, double high, std::string* symbol);

// The kernel of a reduction, broadcast, layout or creation statement; false otherwise.
bool generate_simple(const ir::Stmt& s, SimpleKernel* k, std::string* why, int sm_count = 132);

}  // namespace tracer::codegen
