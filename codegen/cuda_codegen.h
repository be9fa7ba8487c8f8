// CUDA C++ generation for fusion groups (DESIGN section 4, docs/codegen.md).
//
// An elementwise group (a fusion or composite statement made only of elementwise primitives, or a
// single elementwise primitive) becomes one kernel: a grid-stride loop over the elements of its
// outputs, each input read once per element (broadcast inputs through constant index maps), one
// line of source per fused op, named after the trace's values. Storage types are the trace's;
// bf16 and f16 are computed in f32, f64 in f64, integers in 64 bits. When every full-size tensor
// allows it, each thread moves 16 bytes of the narrowest tensor per access (vectorized loads
// and stores); a scalar loop handles the tail.
#pragma once
#include <string>
#include <unordered_set>
#include <vector>

#include "ir/trace.h"

namespace tracer::codegen {

// One kernel parameter: a tensor of the group (input or output), in launch order.
struct KernelParam {
  std::string name;  // the trace value's name
  ir::TensorType type;
  bool output = false;
  ir::ProxyPtr proxy;  // the value itself
  // Declared without __restrict__: an input the executor may overwrite with an output (buffer
  // reuse), or an output that may be written over an input. Only such pairs may share memory.
  bool may_alias = false;
  // Read 16 bytes at a time on the vector path though not of the kernel's full shape (a view read
  // in runs of vector_width elements): the launcher takes that path only when it is aligned.
  bool vector = false;
};

struct Kernel {
  std::string name;      // the C symbol: the fusion's name, or "<op>_<output>" for one primitive
  std::string source;    // CUDA C++ (no includes; compiles with NVRTC alone)
  std::vector<KernelParam> params;  // pointers in this order, then `long long n`
  int64_t elements = 0;  // n: elements of the outputs (all outputs have the same shape)
  int vector_width = 1;  // elements per thread per vector access (1: scalar only)
  std::string origin;    // the statement, printed, for comments and error messages
  // The same kernel with every name replaced by a canonical one ("v0", "v1", ...; the kernel
  // "tr_<hash of the text>"): groups that differ only in names share it, and so compile once
  // (the eight blocks of llama_mlp give the same kernels). `symbol` is its kernel's name.
  std::string structure;
  std::string symbol;
  std::string symbol2;  // a two-stage reduction's second kernel, in the same module; else empty
  // A row group's kernel (rows > 0): one block of 256 threads per row of row_length elements;
  // its parameters are the pointers, then `long long rows`.
  int64_t rows = 0, row_length = 0;
  int row_lanes = 256;  // threads per row: 256 (a block per row) or 32 (a warp per row, 8 a block)
  bool row_cached = false;  // a warp's row inputs are read once into registers (short rows)
  int row_passes = 1;  // passes over each row (a reduction needing another's result starts one; so does a row-shaped output)
  int64_t shared_bytes = 0;  // dynamic shared memory per block (long rows copied there once)
  // A row group with reductions over the columns too (ir::GroupKind::RowsColumns): the row
  // kernel runs on column_chunks blocks, block b taking rows [b * row_chunk, (b + 1) * row_chunk),
  // and writes `partials` doubles (one per block, column reduction and column) into the buffer
  // it takes after vec_ok; then symbol2, with the same arguments, on (row_length + 31) / 32
  // blocks, combines them and writes the per-column outputs.
  bool row_columns = false;
  int64_t row_chunk = 0;
  // A column group's two kernels (columns): rows x row_length, blocks of column_block columns
  // by column_chunks chunks of rows; parameters: the pointers, then the double partials buffer
  // of `partials` elements (generate_columns).
  // column_fold: one column read as row_length folded columns (a reduction of every element):
  // the first kernel's blocks each write one partial per reduction, and the second is one block.
  bool columns = false, column_fold = false;
  int64_t column_block = 0, column_chunks = 0, partials = 0;
  // A horizontal kernel (generate_elementwise_multi): one argument, a block of 64-bit words:
  // its members' pointers one after the other (segment_params of each), then a bit per member
  // (a word each 64: its pointers are 16-byte aligned); launched on `blocks` blocks of 256,
  // member j taking segment_blocks[j] of them in order. Members of the same code share one
  // segment function: segment_kinds of them.
  std::vector<int> segment_params;
  std::vector<int64_t> segment_blocks, segment_elements;
  int64_t blocks = 0;
  int segment_kinds = 0;
  std::vector<int> segment_kind;  // member j's (kinds numbered in order of first appearance)
  // A horizontal column kernel (generate_columns_multi; columns is set): two entries, `symbol`
  // on `blocks` blocks and `symbol2` on `blocks2`; member j reads and writes segment_partials[j]
  // doubles of the partials buffer (`partials` in all), from the sum of the earlier members'
  // (each at least 1). Parameters: the members' pointers, the partials, then vec_mask.
  std::vector<int64_t> segment_partials;
  int64_t blocks2 = 0;
  int column_reductions = 0;  // a column group's reductions (its shared arrays' rows)
};

// Whether s can become one elementwise kernel (and why not, in *why).
bool is_elementwise_group(const ir::Stmt& s, std::string* why = nullptr);

// The inputs of elementwise group s whose buffers an output may take (the executor's buffer
// reuse, docs/memory.md): those in `dying` (they die right after s) with an output's dtype and
// shape. The kernel must not declare these inputs, nor the outputs that may take them,
// __restrict__: with restrict the compiler may move a store to the output above a load of the
// input it overwrites (NVRTC's ptxas does), and a value is read after it was overwritten.
std::unordered_set<const ir::Proxy*> alias_candidates(const ir::Stmt& s, const std::unordered_set<const ir::Proxy*>& dying);

// The kernel of an elementwise group; name must be a C identifier. may_alias: the inputs whose
// buffers an output may take (alias_candidates); those and the outputs of their type are
// declared without __restrict__ (KernelParam::may_alias). Throws std::invalid_argument when s is
// not one (is_elementwise_group says why).
Kernel generate_elementwise(const ir::Stmt& s, const std::string& name,
                            const std::unordered_set<const ir::Proxy*>& may_alias = {});

// Horizontal fusion: independent elementwise groups (none reads another's outputs; an
// optimizer's update of each parameter, a clipping's scale of each gradient) as one kernel, so
// that they cost one launch and small members share the device with large ones. Member j is
// generate_elementwise's kernel for stmts[j] with may_alias[j], turned into a device function
// that runs on its share of the grid (the blocks its own launch would have had, up to 16 per
// multiprocessor of sm_count). At most 64 members.
Kernel generate_elementwise_multi(const std::vector<const ir::Stmt*>& stmts, const std::string& name,
                                  const std::vector<std::unordered_set<const ir::Proxy*>>& may_alias, int sm_count = 132);

// Whether s is a row group (and why not): a fusion of elementwise statements and reductions over
// the last dimension (ir::row_reduction) of one shape [..., C], every value of that shape, of
// the rows' shape [..., 1], or broadcast to it; outputs of the first two shapes.
bool is_row_group(const ir::Stmt& s, std::string* why = nullptr);

// The kernel of a row group (rms_norm, layer_norm, softmax and their backward forms): one block
// per row computes each reduction in turn over the row (recomputing the elementwise values it
// needs from the inputs; floats accumulate in double as on the CPU), then writes the outputs.
// Throws std::invalid_argument when s is not a row group.
// max_shared: the device's dynamic shared memory per block (long rows are copied there once).
Kernel generate_row(const ir::Stmt& s, const std::string& name, const std::unordered_set<const ir::Proxy*>& may_alias = {},
                    long long max_shared = 232448);

// Whether s is a column group (and why not): a fusion whose reductions are over its leading
// dimensions (ir::column_reduction), with the elementwise values they reduce and the values
// computed from the reduced ones (ir/group.h).
bool is_column_group(const ir::Stmt& s, std::string* why = nullptr);

// A column group's two kernels in one module (symbol, symbol2): the pass over the rows
// accumulating each column in double and writing the outputs of the whole shape, then the
// combination of the chunks in order and the per-column values (docs/codegen.md). may_alias as
// for generate_elementwise (outputs of the whole shape may take a dying input's buffer).
Kernel generate_columns(const ir::Stmt& s, const std::string& name, const std::unordered_set<const ir::Proxy*>& may_alias = {});
// Whether s can be a member of a horizontal column kernel: a column group whose outputs are all
// computed from its reduced values (a full reduction's scalar, a bias gradient's row; nothing of
// the group's full shape), with at most 24 reductions.
bool is_horizontal_column_member(const ir::Stmt& s, std::string* why = nullptr);
// Independent column groups (as a gradient norm's sum of squares of each parameter is) as one
// pair of kernels: the first's blocks are dealt out to the members' passes over their rows, the
// second's to their combinations of the partials. Each member computes exactly what its own
// generate_columns kernels compute, in the same order (the same bits).
Kernel generate_columns_multi(const std::vector<const ir::Stmt*>& stmts, const std::string& name);

// FNV-1a, 64 bits, as 16 hex digits (kernel cache keys).
std::string hash_hex(const std::string& text);

// The C type that stores a dtype's elements in generated code ("tr_bf16", "float", ...).
const char* storage_name(rt::DType d);

// A stored element `ref` as the register value it is computed in (bf16/f16 to float, bool to
// bool, integers to long long), and a register value back to its storage type.
std::string load_expr(rt::DType d, const std::string& ref);
// v as dtype d's storage; `exact` when v is a register of a tensor of dtype d (a 16-bit float
// register of a group always holds a rounded value, so its bits are stored without rounding).
std::string store_expr(rt::DType d, const std::string& v, bool exact = false);

// Names a generated kernel by its text: every "tr_kernel" in source becomes "tr_<hash of the
// text>", which is returned (kernels that differ only in names then share one name).
std::string name_by_hash(std::string& source);

// Every kernel the GPU executor launches for a trace: one per elementwise group, reduction and
// broadcast (inside other composites too), named "<trace>_<fusion or op>_<index>" so that names are
// unique within a program. sm_count sizes the split of long reductions (132: the H100 and H200);
// compute_major and max_shared_bytes choose attention's kernels (attention_path_for; the
// defaults are the H100's and H200's).
std::vector<Kernel> kernels_for(const ir::Trace& t, int sm_count = 132, int compute_major = 9,
                                long long max_shared_bytes = 232448);

}  // namespace tracer::codegen
