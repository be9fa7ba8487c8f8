// Running traces on an NVIDIA GPU (docs/codegen.md, "Running on the GPU").
//
// Elementwise groups run as generated kernels (compiled by NVRTC on first use, cached in memory
// by structure and on disk), matmul and linear through cuBLASLt (transposes read in place),
// reshapes and transposes read only by matmuls as views. Every other statement runs on the CPU
// backend with its operands copied over and back (a correct but slow fallback, counted in the
// statistics so that it is never silent). Values die at their `del`; an elementwise statement
// writes over a dying argument's buffer as on the CPU.
#pragma once
#include <array>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <unordered_map>
#include <vector>

#include "codegen/cuda_attention.h"
#include "codegen/cuda_codegen.h"
#include "codegen/cuda_reduce.h"
#include "codegen/nvrtc.h"
#include "ir/op.h"
#include "ir/trace.h"
#include "runtime/cuda.h"
#include "runtime/cudnn.h"

namespace tracer::codegen {

struct AttentionArgs;  // an attention statement's operands on the device (cuda_exec_attention.cpp)
// The attention statements of traces (composites' included) as cuDNN problems, with whether
// each is a backward: prepare() builds their plans ahead of the run.
std::vector<std::pair<rt::cuda::AttentionProblem, bool>> attention_problems(const std::vector<const ir::Trace*>& traces);

struct GpuStats {
  size_t launches = 0;       // generated kernels launched
  size_t horizontal_members = 0;  // elementwise groups launched inside horizontal kernels (each of those counts once above)
  size_t gemms = 0;          // cuBLASLt calls
  size_t gelu_epilogues = 0; // of them, linears that ran the following gelu (tanh) in their epilogue
  size_t dgelu_epilogues = 0; // matmuls that ran the following gelu_backward (tanh, and its bias sum)
  size_t fallbacks = 0;      // statements run on the CPU
  size_t collectives = 0;    // collectives run through NCCL
  size_t graph_launches = 0; // CUDA graph replays
  size_t compiled = 0;       // NVRTC compilations (cache misses)
  size_t disk_hits = 0;      // kernels read from the disk cache
  double compile_ms = 0;     // NVRTC time, summed over kernels
  double compile_wall_ms = 0;  // wall time of prepare()'s parallel compilation
  std::vector<std::string> fallback_ops;  // which ops fell back (distinct)
  // Attention statements by path (docs/cudnn.md): cuDNN's fused engines or tracer's kernels;
  // cuDNN's plans built (or read from the plan cache) for this program, and the time it took.
  size_t attention_cudnn = 0, attention_tracer = 0;
  size_t fusions_viewed = 0;  // layout fusions not run: cuDNN read their outputs in place
  size_t cats_in_place = 0;   // attention gradients cuDNN wrote straight into their concatenation
  size_t outputs_in_layout = 0;  // attention outputs cuDNN wrote transposed, as their readers want
  size_t take_adds_in_place = 0;  // take_backwards added straight into their addend (run_take_backward_add)
  size_t cudnn_plans_built = 0, cudnn_plans_loaded = 0;
  double cudnn_plan_ms = 0;
  std::string cudnn_version, cudnn_library, cudnn_missing;  // the version loaded, or why none
  std::vector<std::string> warnings;  // distinct: why an attention did not run where it should
};

// The on-disk kernel cache: $TRACER_CACHE_DIR, else $XDG_CACHE_HOME/tracer, else ~/.cache/tracer;
// entries keyed by a hash of source, options, architecture and NVRTC version, written atomically,
// checked (length and hash) when read: a corrupt or truncated entry is compiled again.
class KernelCache {
 public:
  explicit KernelCache(std::string dir = default_dir());
  static std::string default_dir();
  // The cubin for `key`, or empty when absent or damaged.
  std::string load(const std::string& key) const;
  void store(const std::string& key, const std::string& cubin) const;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

// A whole run captured as one CUDA graph (GpuExecutor::capture): replaying it launches every
// kernel and matrix product of the run at once, over the same device buffers.
struct GpuGraph {
  std::unique_ptr<rt::cuda::Graph> graph;
  uint64_t draws = 0;                  // random offsets one replay consumes
  size_t launches = 0, gemms = 0, gelu_epilogues = 0, dgelu_epilogues = 0;  // per replay
  bool checks_index = false;           // it gathers or scatters: check_index_errors() after it
};

class GpuExecutor {
 public:
  GpuExecutor(rt::cuda::Device& dev, std::shared_ptr<Nvrtc> nvrtc, KernelCache cache = KernelCache());
  ~GpuExecutor();
  GpuExecutor(const GpuExecutor&) = delete;
  GpuExecutor& operator=(const GpuExecutor&) = delete;

  using Values = std::unordered_map<const ir::Proxy*, rt::cuda::DeviceTensor>;
  // Runs t over device inputs (parallel to t.inputs; moved in); returns the device values of the
  // proxies in t.output. ctx serves the CPU fallbacks (allocator, random state).
  Values run(const ir::Trace& t, std::vector<rt::cuda::DeviceTensor> inputs, ir::ExecContext& ctx);

  rt::cuda::DeviceTensor upload(const rt::Tensor& t);
  // A tensor of type t filled with value, by a kernel (in stream order; capturable).
  rt::cuda::DeviceTensor full(const ir::TensorType& t, double value);

  // Captures the device work of `work` (runs of traces through this executor) as one graph.
  // Nothing runs meanwhile: the values `work` gets back are the buffers the replays will fill.
  // Throws (and leaves nothing captured) when a statement would need the CPU or a copy to the
  // host. Random draws: each replay advances ctx's generator as a run does.
  std::unique_ptr<GpuGraph> capture(const std::function<void()>& work, ir::ExecContext& ctx);
  // Launches g (asynchronously): the buffers captured as inputs are read as they are now.
  // The caller keeps the tensors it passed to the captured runs alive, and unchanged in
  // place unless on purpose, for as long as it replays g: the graph owns only what the capture
  // allocated or released.
  void replay(GpuGraph& g, ir::ExecContext& ctx);
  // replay for a program that goes on without waiting (compiled functions' graphs): an earlier
  // bad index is raised if its flag is back, and this replay's is read back asynchronously, as
  // run() does.
  void replay_async(GpuGraph& g, ir::ExecContext& ctx);
  // After replays (run() does it itself): waits for the device and throws when a take or
  // take_backward met an index out of range.
  void check_index_errors();
  rt::Tensor download(const rt::cuda::DeviceTensor& t, rt::Allocator* al);

  // Generates every kernel the traces will launch and compiles those missing from the memory and
  // disk caches in parallel (one thread per core), then loads them: the runs that follow compile
  // nothing. Kernels that cannot be generated are left to run()'s own paths.
  void prepare(const std::vector<const ir::Trace*>& traces);

  // Per-statement caches are keyed by the statements' addresses: call this before running traces
  // other than the ones run last (compiled kernels, keyed by structure, are kept).
  void new_program() {
    kernels_.clear();
    without_cat_.clear();
    out_layouts_.clear();
    out_layouts_planned_.clear();
    trace_readers_.clear();
    input_layouts_.clear();
    is_group_.clear();
    simple_.clear();
    take_add_.clear();
    uniform_fns_.clear();
    horizontal_.clear();
    trace_plans_.clear();
    view_fusions_ = &no_plan_.view_fusions;
  }

  // Attention operands read in place (codegen/cuda_exec_views.cpp): a fusion output as a chain
  // of layout statements from one of the fusion's arguments, and that chain applied to a
  // contiguous tensor as a strided view (false where it is no view: a reshape that would copy, a
  // slice with steps).
  struct ViewChain {
    size_t source = 0;                    // the fusion argument the output is cut from
    std::vector<const ir::Stmt*> steps;   // slices, reshapes and transposes, in order
  };
  struct ViewFusion {
    std::vector<ViewChain> chains;            // per output
    std::vector<const ir::Stmt*> readers;     // the attention statements reading the outputs
  };
  // An attention's output written in the layout its readers want (plan_out_layouts): when every
  // reader of a forward's output is a transpose by one permutation that keeps the head dimension
  // innermost (the heads put back beside each other for the output projection) or a backward
  // reading it as its saved output, cuDNN writes the output straight in the transposed layout,
  // the transposes become relabellings of that buffer, and the backward reads it strided.
  struct OutLayout {
    const ir::Proxy* out = nullptr;  // the attention's output
    std::vector<int64_t> perm;       // the transposes' permutation
    ir::ProxyPtr z;                  // the first transpose's output: the layout's shape and type
    std::unique_ptr<ir::Stmt> back;  // transpose(z, inverse perm) -> out: the packed output, when needed
    bool fits = false;               // every reader here takes the layout
  };
  using ReaderMap = std::unordered_map<const ir::Proxy*, std::vector<std::pair<const ir::Stmt*, size_t>>>;
  // Each value's readers in t (statement, argument position): composites looked into unless the
  // executor runs them as one kernel, fusions by their arguments.
  static ReaderMap reader_map(const ir::Trace& t);
  // Whether every reader of v takes it held as transpose(v, *perm) (transposes by that
  // permutation, attention backwards reading it as their saved output); an empty *perm is set
  // from the first transpose. The permutation keeps the last dimension last.
  static bool readers_take(const ReaderMap& readers, const ir::Proxy* v, std::vector<int64_t>* perm);
  struct OperandView {
    rt::cuda::DeviceTensor base;  // the buffer the view reads
    int64_t offset = 0;           // elements
    rt::Shape shape;
    std::vector<int64_t> strides;
    const ir::Stmt* fusion = nullptr;     // the fusion not run, or
    const OutLayout* layout = nullptr;    // the attention output written transposed
  };
  static bool layout_chain(const ir::Stmt& fusion, const ir::Proxy* out, ViewChain* chain);
  static bool apply_chain(const ViewChain& chain, const rt::cuda::DeviceTensor& src, OperandView* v);
  // The cuDNN problem of an attention over operand views ({q, k, v}, or the backward's {g, q, k,
  // v, o}; the outputs packed), or false when a view does not fold into [b, h, s, d].
  // An attention backward's gradients written straight into the cat that the fusion after it
  // makes of them (run_attention_into_cat): the fusion without the cat and the views feeding it
  // (null when nothing else is left), the cat's value, and each gradient's [b, h, s, d] strides
  // and first element's offset in it. cat is null when the fusion does anything else with the
  // gradients, or a piece is not a whole gradient relabelled (plan_cat).
  struct CatPlan {
    std::unique_ptr<ir::Stmt> rest;
    const ir::Proxy* cat = nullptr;
    ir::ProxyPtr cat_value;
    std::vector<std::array<int64_t, 4>> strides;  // dq, dk, dv
    std::vector<int64_t> offsets;
  };
  static CatPlan plan_cat(const ir::Stmt& backward, const ir::Stmt& fusion);
  static bool view_problem(const std::vector<OperandView>& ops, bool backward, bool causal, double scale,
                           rt::cuda::AttentionProblem* p);
  const GpuStats& stats() const { return stats_; }
  // Problems TRACER_GPU_CHECK found so far (0 when checking is off).
  size_t check_failures() const { return check_failures_; }
  void reset_stats() { stats_ = GpuStats(); }
  rt::cuda::Device& device() { return dev_; }
  // With TRACER_GPU_PROFILE=1 set: the device time of every statement run so far, by kind.
  bool profiling() const { return profile_; }
  void print_profile(std::ostream& out);
  void clear_profile() {
    profile_table_.clear();
    profile_rows_.clear();
  }

 private:
  struct Compiled {
    std::string cubin;
    void* fn = nullptr;
  };
  void run_stmts(const std::vector<ir::Stmt>& stmts, Values& env, ir::ExecContext& ctx,
                 const std::unordered_set<const ir::Proxy*>& lazy);
  void run_stmt(const ir::Stmt& s, Values& env, ir::ExecContext& ctx, const std::unordered_set<const ir::Proxy*>& dying,
                const std::unordered_set<const ir::Proxy*>& lazy);
  void run_kernel(const ir::Stmt& s, Values& env, const std::unordered_set<const ir::Proxy*>& dying);
  void run_row_kernel(const ir::Stmt& s, Values& env, const std::unordered_set<const ir::Proxy*>& dying);
  void run_column_kernel(const ir::Stmt& s, Values& env, const std::unordered_set<const ir::Proxy*>& dying);
  // A generated kernel's pointers (scratch_ptrs_) in its parameter order: the inputs' buffers,
  // then each output's, written over a dying input where the kernel allows (KernelParam::
  // may_alias); bind_outputs then gives the outputs their values (and drops the donors).
  struct Prepared;
  void bind(Prepared& prep, Values& env, const std::unordered_set<const ir::Proxy*>& dying);
  // Buffer reuse, in two steps. donor_candidates (once per kernel, as its statement's dels do
  // not change between runs): for each output among params[begin, end), the inputs there whose
  // buffer it may take: declared may-alias with it (no __restrict__), dying here, of its dtype
  // and size. pick_donor (each run): the first of them not yet taken whose buffer nothing else
  // holds, packed and not a lazy transpose: its param index, -1 when none.
  using DonorCandidates = std::vector<std::vector<uint32_t>>;  // by param index (outputs only)
  static DonorCandidates donor_candidates(const std::vector<KernelParam>& params, size_t begin, size_t end,
                                          const std::unordered_set<const ir::Proxy*>& dying);
  template <class Taken>
  int64_t pick_donor(const std::vector<uint32_t>& candidates, const std::vector<KernelParam>& params,
                              const Values& env, const Taken& taken) const {
    // taken(b): whether input param b's buffer went to an earlier output already.
    for (uint32_t b : candidates) {
      if (taken(b)) continue;
      const ir::Proxy* q = params[b].proxy.get();
      const rt::cuda::DeviceTensor& d = env.at(q);
      if (d.buffer.use_count() == 1 && d.offset == 0 && d.buffer->bytes == d.nbytes() && (transposed_.empty() || !transposed_.count(q)))
        return static_cast<int64_t>(b);
    }
    return -1;
  }
  void bind_outputs(const Kernel& k, Values& env);
  // prims.slice as a view of its input where it is one run of it (no kernel).
  bool slice_view(const ir::Stmt& s, Values& env);
  // prims.matmul and prims.linear (codegen/cuda_exec_matmul.cpp).
  bool run_matmul(const ir::Stmt& s, Values& env, const std::unordered_set<const ir::Proxy*>& lazy);
  // A linear's operands on the device, none read transposed: x [..., K], w [N, K], bias [N].
  struct LinearOperands {
    const rt::cuda::DeviceTensor *A = nullptr, *B = nullptr;
    rt::cuda::DevPtr bias = 0;
    int64_t M = 0, N = 0, K = 0;
    rt::DType dt = rt::DType::f32;
  };
  bool linear_operands(const ir::Stmt& s, Values& env, LinearOperands* out);
  // stmts[i] a linear whose output the next statement j only passes through gelu(tanh): both by
  // one cuBLASLt call with the GELU epilogue; *j gets the statement it ran (to skip), or false.
  bool run_linear_gelu(const std::vector<ir::Stmt>& stmts, size_t i, Values& env, size_t* j);
  // A matmul's operands on the device (either read transposed) and the form of the product.
  struct MatmulOperands {
    const rt::cuda::DeviceTensor *A = nullptr, *B = nullptr;
    bool ta = false, tb = false;
    int64_t M = 0, N = 0, K = 0, na = 1, nb = 1;  // the last two dims' sizes; batch counts
    bool stacked = false;     // B unbatched and A not transposed: one product of na * M rows
    bool same_batch = false;  // A and B of the same batch dimensions
    rt::DType dt = rt::DType::f32;
  };
  bool matmul_operands(const ir::Stmt& s, Values& env, MatmulOperands* out);
  // stmts[i] a matmul (one product, 16-bit or f32) whose output only the next statement j reads,
  // as the cotangent of gelu_backward(approximate="tanh") (alone, or fused with its column sums,
  // a bias gradient): both by one cuBLASLt call with the DGELU(_BGRAD) epilogue.
  bool run_matmul_dgelu(const std::vector<ir::Stmt>& stmts, size_t i, Values& env, ir::ExecContext& ctx,
                        const std::unordered_set<const ir::Proxy*>& lazy, size_t* j);
  // stmts[i] an attention_backward on cuDNN whose gradients the next statement j (a fusion) only
  // puts back out of heads and concatenates (the qkv gradient): cuDNN writes dq, dk and dv
  // straight into the concatenation's buffer, and j runs without the cat (cuda_exec_attention.cpp).
  bool run_attention_into_cat(const std::vector<ir::Stmt>& stmts, size_t i, Values& env, ir::ExecContext& ctx,
                              const std::unordered_set<const ir::Proxy*>& lazy, size_t* j);
  // stmts[i] a take_backward whose output the next statement j only adds to a tensor of its type
  // and shape that dies there (tied embeddings: the LM head's weight gradient): the rows are
  // added into that tensor's buffer in place, and the rows no index names are not touched, where
  // take_backward would write the whole table and add read it back.
  bool run_take_backward_add(const std::vector<ir::Stmt>& stmts, size_t i, Values& env, size_t* j);
  // Any pair above, or false.
  bool run_pair(const std::vector<ir::Stmt>& stmts, size_t i, Values& env, ir::ExecContext& ctx,
                const std::unordered_set<const ir::Proxy*>& lazy, size_t* j) {
    return run_linear_gelu(stmts, i, env, j) || run_matmul_dgelu(stmts, i, env, ctx, lazy, j) ||
           run_attention_into_cat(stmts, i, env, ctx, lazy, j) ||
           run_take_backward_add(stmts, i, env, j);
  }
  // The five take_backward kernels of k over (grad, index) into y (cuda_exec_gathers.cpp).
  void launch_take_backward(const SimpleKernel& k, void* first, rt::cuda::DevPtr grad, rt::cuda::DevPtr index, rt::cuda::DevPtr y);
  void run_on_cpu(const ir::Stmt& s, Values& env, ir::ExecContext& ctx);
  void* kernel_function(const Kernel& k);
  void* compiled(const std::string& source, const std::string& symbol, const std::string& label);
  bool run_simple(const ir::Stmt& s, Values& env);  // reductions, broadcasts, layouts, creations
  void run_rng_state(const ir::Stmt& s, Values& env, ir::ExecContext& ctx);
  // prims.attention and attention_backward (codegen/cuda_exec_attention.cpp).
  bool run_attention(const ir::Stmt& s, Values& env, ir::ExecContext& ctx);
  bool run_attention_cudnn(const ir::Stmt& s, Values& env, const AttentionArgs& a);
  // Runs a prepared problem; in: the operands' addresses ({q, k, v}, or {g, q, k, v, o}).
  // outs (the backward's): where dq, dk and dv go instead of new tensors (their strides in p).
  // bias: the problem's additive mask (p.bias), else unused.
  void launch_cudnn(const ir::Stmt& s, Values& env, const rt::cuda::AttentionProblem& p, const std::vector<rt::cuda::DevPtr>& in,
                    const std::vector<rt::cuda::DevPtr>* outs = nullptr, rt::cuda::DevPtr bias = 0);
  // A masked attention through cuDNN's graph with a bias (the mask in the I/O dtype, a b8 one
  // converted to 0 / -inf), where the mask is [1 or b, 1 or h, L, S]; false where it is not or
  // cuDNN has no plan (tracer's rows kernels run it then).
  bool run_attention_cudnn_masked(const ir::Stmt& s, Values& env, const AttentionArgs& a);
  void plan_views(const ir::Trace& t, std::unordered_map<const ir::Stmt*, ViewFusion>& out);  // (and out_layouts_)
  void plan_out_layouts(const ir::Trace& t);
  const ReaderMap& readers_of(const ir::Trace& t);  // each value's readers (statement, argument), once per trace
  // An input that arrives held transposed (DeviceTensor::layout, an attention output the trace
  // before wrote so): a view where this trace's readers take it in place, else put back packed.
  void take_layout_input(const ir::Trace& t, const ir::ProxyPtr& p, rt::cuda::DeviceTensor d, Values& env);
  // A forward attention with an OutLayout: cuDNN writes its output transposed (true), or false
  // when cuDNN has no plan for that layout (the caller writes it packed).
  bool launch_cudnn_out_layout(const ir::Stmt& s, Values& env, const rt::cuda::AttentionProblem& p,
                               const std::vector<rt::cuda::DevPtr>& in);
  // transpose(x) of a live view whose result is packed memory: the view's buffer relabelled.
  bool alias_transposed_view(const ir::Stmt& s, const OperandView& v, Values& env);
  // The problem and operand addresses of attention statement s reading views (views_, and
  // `extra` not yet registered); false when no operand is a view or the views do not fit.
  bool operand_views(const ir::Stmt& s, const Values& env, const std::unordered_map<const ir::Proxy*, OperandView>& extra,
                     rt::cuda::AttentionProblem* p, std::vector<rt::cuda::DevPtr>* ptrs);
  bool skip_view_fusion(const ir::Stmt& s, const Values& env);  // true: s's outputs are views now
  void materialize_views(const ir::Stmt& s, Values& env, ir::ExecContext& ctx);  // the fusions behind s's views, run
  // cuDNN, opened on first use (null when absent: cudnn_why_ says why).
  rt::cuda::Cudnn* cudnn();
  // The cuDNN path's verdict for a problem: "" when its plan is ready, else why not (*warn:
  // whether the reason deserves a warning, as opposed to a case cuDNN never takes).
  std::string cudnn_ready(const rt::cuda::AttentionProblem& p, bool backward, bool* warn);
  void warn(const std::string& w);
  void run_attention_flash(const ir::Stmt& s, Values& env, const AttentionArgs& a);
  void run_attention_rows(const ir::Stmt& s, Values& env, const AttentionArgs& a);
  // The compiled kernel `make` generates, generated once per executor under `key`.
  std::pair<void*, const AttentionKernel*> attention_kernel(const std::string& key, const std::function<AttentionKernel()>& make,
                                                            const std::string& label);
  // prims.uniform (the stateful generator) as a kernel reading the run's generator base.
  bool run_uniform(const ir::Stmt& s, Values& env, ir::ExecContext& ctx);
  void ensure_rng_base(ir::ExecContext& ctx);  // the base written once per run (or by a replay)
  rt::cuda::DeviceTensor alloc(const ir::TensorType& t);
  // Collectives (codegen/cuda_exec_dist.cpp): through the job's NCCL communicator on the device's
  // communication stream, ordered against the compute stream by events; an asynchronous one's
  // result is handed over at its wait, its buffers kept until then.
  static bool is_collective(const std::string& op);
  void run_collective(const ir::Stmt& s, Values& env, ir::ExecContext& ctx);
  void finish_collectives();  // at the end of a run: the compute stream waits for any left pending
  // x (packed, of type from) permuted by perm, by a transpose kernel generated once per (owner, role).
  rt::cuda::DeviceTensor permuted(const ir::Stmt& owner, int role, const rt::cuda::DeviceTensor& x, const std::vector<int64_t>& perm);
  rt::cuda::DeviceTensor sliced(const ir::Stmt& owner, int role, const rt::cuda::DeviceTensor& x, int64_t dim, int64_t lo, int64_t hi);
  rt::cuda::DeviceTensor run_synthesized(const ir::Stmt& owner, int role, const char* op, const rt::cuda::DeviceTensor& x,
                                         rt::Shape out_shape, std::vector<ir::Arg> extra);
  void* take_event();
  struct PendingCollective {
    void* event = nullptr;                          // recorded on the communication stream after it
    std::vector<rt::cuda::DeviceTensor> keep;       // its input and output, alive until the wait
    rt::cuda::DeviceTensor result;                  // what the wait hands on (before `back`)
    std::vector<int64_t> back;                      // a permutation the wait applies (dim != 0), or empty
  };
  std::unordered_map<const ir::Proxy*, PendingCollective> pending_;
  std::vector<void*> events_;  // events free for reuse
  std::unordered_map<const ir::Stmt*, std::vector<std::unique_ptr<ir::Stmt>>> dist_stmts_;  // synthesized transposes, slices
  // TRACER_GPU_CHECK (codegen/cuda_exec_check.cpp): statement-by-statement comparison with the CPU.
  rt::Tensor host_value(const ir::Proxy* p, const Values& env, rt::Allocator* al);
  void check_begin(const ir::Trace& t, const Values& env, ir::ExecContext& ctx);
  void check_inputs(const ir::Stmt& s, const Values& env, ir::ExecContext& ctx);
  // After stmts[i] ran (and stmts[also], when a GELU epilogue ran it too; else also >= size).
  void check_outputs(const std::vector<ir::Stmt>& stmts, size_t i, size_t also, const Values& env, ir::ExecContext& ctx);
  void check_end(const ir::Trace& t);

  rt::cuda::Device& dev_;
  std::shared_ptr<Nvrtc> nvrtc_;
  KernelCache cache_;
  struct Prepared {
    Kernel kernel;
    void* fn = nullptr;
    void* fn2 = nullptr;  // a column group's second kernel
    DonorCandidates donors;  // (bind's, made at its first call)
    bool donors_ready = false;
  };
  // Masked attention statements' per-batch mask offsets (run_attention_rows), on the device.
  std::unordered_map<const ir::Stmt*, std::shared_ptr<rt::cuda::Buffer>> mask_offsets_;
  std::unordered_map<const ir::Stmt*, Prepared> kernels_;    // generated and loaded once per statement
  std::unordered_map<const ir::Stmt*, CatPlan> without_cat_;  // plan_cat's, by fusion
  std::unordered_map<const ir::Stmt*, int> is_group_;  // 1: elementwise group, 2: row group, 3: column group, 0: none; once per statement
  std::unordered_map<const ir::Stmt*, bool> column_member_;  // is_horizontal_column_member, once per statement
  // Horizontal fusion (cuda_exec_horizontal.cpp; TRACER_HORIZONTAL=0 turns it off): runs of
  // independent elementwise groups, dels between them allowed, launched as one kernel. Planned
  // once per statement that starts a run (null: none starts there).
  struct Horizontal {
    std::vector<size_t> members;  // statement indices, in order (dels between them run after the launch)
    std::vector<std::unordered_set<const ir::Proxy*>> dying;  // per member: the dels right after it, less what other members read
    Kernel kernel;
    void* fn = nullptr;
    // Column groups' (generate_columns_multi): a second entry, and no donors (their outputs are
    // computed from reduced values, never of an input's size).
    bool columns = false;
    void* fn2 = nullptr;
    DonorCandidates donors;  // over kernel.params, each member's outputs among its own params
    // Per param: read or written 16 bytes at a time (full size, or KernelParam::vector), so its
    // pointer decides whether its member takes the vector path.
    std::vector<char> vector_access;
  };
  std::unordered_map<const ir::Stmt*, std::shared_ptr<Horizontal>> horizontal_;
  size_t max_param_bytes() const;  // a kernel's parameters: 32 KiB from CUDA 12.1 on sm_70+, else 4 KiB
  bool horizontal_on_ = true;
  std::shared_ptr<Horizontal> plan_horizontal(const std::vector<ir::Stmt>& stmts, size_t i,
                                              const std::unordered_set<const ir::Proxy*>& lazy);
  // Runs the horizontal group starting at stmts[i] when there is one and its buffers allow it
  // (*next: the statement after its last member); false: run stmts[i] alone.
  bool run_horizontal(const std::vector<ir::Stmt>& stmts, size_t i, Values& env, ir::ExecContext& ctx,
                      const std::unordered_set<const ir::Proxy*>& lazy, size_t* next);
  struct Simple {
    bool ok = false;
    SimpleKernel kernel;
    void* fn = nullptr;
    void* fn2 = nullptr;
  };
  std::unordered_map<const ir::Stmt*, Simple> simple_;       // generate_simple, once per statement
  std::unordered_map<const ir::Stmt*, Simple> take_add_;     // run_take_backward_add's kernels, by take_backward
  std::unordered_map<std::string, Compiled> by_symbol_;      // compiled once per structure
  std::unordered_map<const ir::Proxy*, bool> transposed_;    // lazy transposes in env
  GpuStats stats_;
  std::vector<rt::cuda::DevPtr> scratch_ptrs_;
  std::vector<rt::cuda::DeviceTensor> scratch_outs_;
  std::vector<const ir::Proxy*> scratch_donors_;
  std::vector<char> scratch_taken_;  // by param index: an input whose buffer an output took
  std::vector<void*> scratch_args_;
  unsigned long long scratch_masks_[8] = {};  // a horizontal launch's vec_mask words (up to 512 members)
  std::vector<unsigned long long> scratch_arg_block_;  // a horizontal elementwise launch's one argument
  // The generator's device state for rng_state (see run_rng_state).
  void* rng_fn_ = nullptr;
  std::shared_ptr<rt::cuda::Buffer> rng_base_;
  long long rng_host_[2] = {0, 0};
  void write_rng_base(const ir::ExecContext& ctx);  // (seed, offset now) to rng_base_, in stream order
  uint64_t rng_start_ = 0;
  bool rng_ready_ = false;
  bool in_graph_ = false;  // capturing: nothing may synchronize
  // take and take_backward report a bad index here (flag, index, rows). A run ends by copying
  // the flag to pinned host memory in stream order (read_index_errors_later); it is read, and a
  // bad index thrown, when that copy has run: at the next run's start if it has by then, at a
  // download, or at check_index_errors(), which waits. So runs never wait for the device, and no
  // value reaches the host from a run whose index was bad without the error.
  rt::cuda::DevPtr index_errors();
  void read_index_errors_later();
  void poll_index_errors(bool wait);
  std::shared_ptr<rt::cuda::Buffer> index_err_;
  bool index_check_pending_ = false;  // kernels wrote the flag since it was last copied
  bool index_read_pending_ = false;   // a copy of the flag to index_host_ is in flight
  unsigned long long* index_host_ = nullptr;  // pinned (3 words); null: checks wait
  void* index_event_ = nullptr;
  std::unordered_map<std::string, AttentionKernel> attention_kernels_;  // by dtype, head size, causality
  enum class AttentionChoice { Auto, Cudnn, Tracer };  // TRACER_ATTENTION
  AttentionChoice attention_choice_ = AttentionChoice::Auto;
  std::string attention_setting_error_;
  // TRACER_DGELU_EPILOGUE: 0 (run_matmul_dgelu off), apart (also where a bias gradient follows,
  // its column kernel after the product), bgrad (that gradient by cuBLASLt's DGELU_BGRAD), else
  // (auto) only where no bias gradient follows.
  enum class DGeluEpilogue { Off, Auto, Apart, BGrad } dgelu_epilogue_ = DGeluEpilogue::Auto;
  bool attention_cat_ = true;  // TRACER_ATTENTION_CAT=0: run_attention_into_cat off
  bool out_layout_ = true;     // TRACER_ATTENTION_OUT_LAYOUT=0: attention outputs written packed
  // Per trace, made at its first run (until new_program): the fusions that may become views
  // (plan_views) and the transposes only matrix products read (ir::lazy_transposes).
  struct TracePlan {
    std::unordered_map<const ir::Stmt*, ViewFusion> view_fusions;
    std::unordered_set<const ir::Proxy*> lazy;
  };
  std::unordered_map<const ir::Trace*, TracePlan> trace_plans_;
  TracePlan no_plan_;
  const std::unordered_map<const ir::Stmt*, ViewFusion>* view_fusions_ = &no_plan_.view_fusions;  // the running trace's
  std::unordered_map<const ir::Proxy*, OperandView> views_;        // live views
  std::unordered_map<const ir::Stmt*, OutLayout> out_layouts_;     // by attention statement (until new_program)
  std::unordered_set<const ir::Trace*> out_layouts_planned_;
  std::unordered_map<const ir::Trace*, ReaderMap> trace_readers_;
  std::map<std::pair<const ir::Proxy*, std::vector<int64_t>>, OutLayout> input_layouts_;  // take_layout_input's
  std::unordered_map<const ir::Stmt*, std::vector<rt::cuda::DeviceTensor>> viewed_inputs_;  // a skipped fusion's inputs
  bool materializing_ = false;
  bool views_enabled_ = true;  // operands read in place; TRACER_ATTENTION_VIEWS=0 turns it off
  std::unique_ptr<rt::cuda::Cudnn> cudnn_;
  bool cudnn_tried_ = false;
  std::string cudnn_why_;
  std::unordered_map<const ir::Stmt*, void*> uniform_fns_;               // run_uniform's kernels
  int check_ = 0;    // TRACER_GPU_CHECK: 1 compares each statement with the CPU, 2 also watches live values
  int depth_ = 0;    // run_stmts nesting: checks apply to a trace's own statements
  // TRACER_GPU_PROFILE=host: the host's time per run (set-up, statements by kind, the end),
  // printed to stderr when the executor goes: where a host-bound step spends its time.
  bool host_profile_ = false;
  std::map<std::string, std::pair<double, long>> host_times_;
  void host_time(const std::string& what, std::chrono::steady_clock::time_point since);
  void print_host_times();
  std::vector<ir::ProxyPtr> check_in_names_;
  std::vector<rt::Tensor> check_in_;
  struct Snapshot {
    rt::cuda::DevPtr ptr = 0;
    rt::Tensor host;
    std::string origin;
  };
  std::unordered_map<const ir::Proxy*, Snapshot> check_snap_;
  size_t check_compared_ = 0, check_failures_ = 0, check_trace_failures_ = 0;
  double check_worst_ = 0;
  bool profile_ = false;
  bool profile_each_ = false;  // TRACER_GPU_PROFILE=2: also every statement, with its bytes
  std::unordered_map<std::string, std::pair<double, int>> profile_table_;
  struct ProfileRow {
    double ms;
    double bytes;
    std::string what;
  };
  std::vector<ProfileRow> profile_rows_;
};

}  // namespace tracer::codegen
