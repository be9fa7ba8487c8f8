// tracer's public C++ API: load a module, trace a function, print, check and run it.
// The `tracer` program is written against this header only.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tracer {

struct SessionOptions {
  uint64_t seed = 0;                 // random inputs and the stateful RNG
  int64_t step_limit = 500'000'000;  // statements and calls a script may run; 0: unlimited
  // Bytes the CPU may hold in tensors, and the most one of the script's values (a list, a
  // string) may take; 0: 90% of physical memory.
  size_t memory_limit = 0;
  std::function<void(const std::string&)> print;  // script output; default: stdout
  // Loading fails when a value given by set() names nothing the module mentions (a typo:
  // `tracer run --set NOPE=3`); off by default, so that a host may set sizes for several files.
  bool strict_settings = false;
  // Trace for a job of world_size ranks, as rank world_rank, without joining one (tracer check,
  // print and mem --world-size): dist.group() and Thunder's process groups get that size.
  // 0: the joined job's size (join_job), else what a printout's collectives imply, else 1.
  int world_size = 0;
  int world_rank = 0;
  // The loaded file is the program being run (tracer run): its `__name__` is "__main__", so an
  // `if __name__ == "__main__":` block runs; otherwise it is the file's stem and the block does not.
  bool main_program = false;
};

// A diagnostic as data; `rendered` is the clang-style text with the source line and caret.
struct DiagnosticInfo {
  std::string severity;  // "error", "warning" or "note"
  std::string file;
  int line = 0, column = 0;
  std::string message;
  std::string rendered;
};

struct OutputInfo {
  std::string name;        // the proxy's name in the trace, or "out[i]" for constants
  bool is_tensor = false;
  std::string dtype;       // tensors: "f32", ...
  std::vector<int64_t> shape;
  std::string summary;     // "f32[2, 3] [...] sum=..." or the constant's repr
  double sum = 0;
  std::vector<double> head;  // the first few values
};

struct InputInfo {
  std::string name, dtype, source;  // source: a file, or "random"
  std::vector<int64_t> shape;
};

struct RunReport {
  std::vector<InputInfo> inputs;
  std::vector<OutputInfo> outputs;  // after grad: the loss, then a gradient per input
  size_t peak_bytes = 0;            // the CPU allocator's peak during the run (inputs included)
  size_t estimated_peak_bytes = 0;  // what the memory estimator predicted for the same traces
  size_t statements = 0;            // top-level statements of the traces
  double trace_ms = 0, passes_ms = 0, run_ms = 0;
  // On a GPU (set_device("cuda")): the device, its allocator's peak over one run of the program
  // (inputs included), and what ran where. With set_bench(N): N timed runs after one warm-up.
  std::string device = "cpu";
  size_t device_peak_bytes = 0;
  size_t kernels_launched = 0, kernels_compiled = 0, kernel_disk_hits = 0, gemms = 0, cpu_fallbacks = 0;
  size_t collectives = 0;  // collectives run through NCCL (a job's GPU run)
  size_t horizontal_members = 0;  // elementwise groups that ran inside horizontal kernels (one launch each run of them)
  size_t gelu_epilogues = 0;  // linears that ran the following gelu (tanh) in cuBLASLt's epilogue
  size_t dgelu_epilogues = 0;  // matmuls that ran the following gelu_backward (tanh, and its bias sum) in it
  // cuBLASLt tuning (docs/codegen.md; TRACER_MATMUL_TUNE=0 turns it off): problems timed on
  // first use, those where another candidate than the heuristics' first won, choices read back
  // from the cache, the host time spent, and the device time the choices save (per call of each
  // problem, summed over the problems).
  int matmul_tuned = 0, matmul_tune_changed = 0, matmul_tune_loaded = 0;
  double matmul_tune_ms = 0, matmul_tune_saved_ms = 0;
  double compile_ms = 0;       // NVRTC time summed over kernels
  double compile_wall_ms = 0;  // wall time of compiling them (in parallel, before the first run)
  std::vector<std::string> fallback_ops;
  // Attention statements by path (docs/cudnn.md): cuDNN's fused engines or tracer's kernels;
  // the cuDNN loaded (its version and file, or why none was) and the plans built for this
  // program (compiled now, or read from the plan cache) with the time spent on them.
  size_t attention_cudnn = 0, attention_tracer = 0;
  size_t attention_fusions_viewed = 0;  // layout fusions not run: cuDNN read q, k, v in place
  size_t attention_cats_in_place = 0;   // backwards whose dq, dk, dv cuDNN wrote into their cat
  size_t attention_outputs_in_layout = 0;  // forwards whose output cuDNN wrote transposed, as its readers want
  size_t take_adds_in_place = 0;  // take_backwards added into the tensor they are added to (tied embeddings)
  std::string cudnn_version, cudnn_library, cudnn_missing;
  size_t cudnn_plans_built = 0, cudnn_plans_loaded = 0;
  double cudnn_plan_ms = 0;
  int bench_runs = 0;
  double bench_median_ms = 0, bench_min_ms = 0, bench_max_ms = 0;
  // On a GPU, per timed run: the host's time to issue the run's work (before waiting for the
  // device; the median), and how much of it was spent inside the driver's launch calls.
  double bench_host_median_ms = 0, bench_launch_api_ms = 0;
  std::vector<double> bench_runs_ms;  // every timed run, in order
  // With set_cuda_graph(true): whether the program was captured (a warning says why not), the
  // graph's nodes and the device memory it keeps for its replays.
  bool cuda_graph = false;
  size_t graph_nodes = 0, graph_bytes = 0;
};

struct PassInfo {
  std::string name;
  double ms = 0;
};

// The memory estimator's view of a program (tracer mem): live bytes statement by statement.
struct MemoryReport {
  size_t peak_bytes = 0;
  std::string peak_trace;       // name of the trace running at the peak
  size_t peak_index = 0;        // its statement index
  std::string peak_statement;   // that statement, printed
  size_t saved_for_backward_bytes = 0;
  // ... of which by distribution over the job's ranks: the same on every rank, this rank's
  // slice of a sharded tensor, its own (docs/distributed.md); the rest is not known.
  size_t saved_replicated_bytes = 0, saved_sharded_bytes = 0, saved_per_rank_bytes = 0;
  // Communication buffers (collectives' results until they die): live at the peak; the most
  // live at any point.
  size_t peak_comm_bytes = 0, comm_peak_bytes = 0;
  int world_size = 1, rank = 0;  // the rank this estimate is for
  size_t input_bytes = 0;       // the forward's inputs (parameters and data), held throughout
  std::vector<std::string> traces;
  std::vector<std::pair<std::string, size_t>> peak_live;  // live at the peak, largest first
  struct Point {
    int trace = 0;
    size_t index = 0;
    size_t live_bytes = 0;
  };
  std::vector<Point> timeline;
};

// tracer compile: the CUDA kernels of a program (docs/codegen.md).
struct KernelInfo {
  std::string name;       // the kernel's readable name (its symbol in --emit cuda sources)
  std::string symbol;     // its symbol in the cubin or PTX: tr_<hash of its structure>
  std::string trace;      // the trace it belongs to ("main", "backward")
  std::string statement;  // the statement it computes, printed
  std::string file;       // the file written
  size_t bytes = 0;       // of the file
  double compile_ms = 0;  // NVRTC's time (0 for --emit cuda)
  int64_t elements = 0;   // elements per launch
  int vector_width = 1;   // elements per thread per vector access
};
struct CompileReport {
  std::string arch, emit;       // "sm_90", "cuda" | "ptx" | "cubin"
  std::string nvrtc_version;    // empty for --emit cuda
  std::string out_dir;
  std::vector<KernelInfo> kernels;
  size_t compiled = 0;          // distinct kernels compiled (groups that differ only in names share one)
  double wall_ms = 0;           // all compilations (they run in parallel)
};

// An SVG chart of a memory report: live bytes over the statements of each trace in turn, the
// peak marked, the traces labelled.
std::string memory_svg(const MemoryReport& r, const std::string& title);

// A rank's place in a distributed job (docs/distributed.md).
struct JobInfo {
  int rank = 0, world_size = 1, local_rank = 0, local_world_size = 1;
  std::string store;  // MASTER_ADDR:MASTER_PORT, where rank 0 serves the job's store
};

// Splits a pass list at the commas outside parentheses: "grad, fsdp(zero=3, prefetch=2)" gives
// {"grad", "fsdp(zero=3, prefetch=2)"}.
std::vector<std::string> split_passes(const std::string& list);

class Session {
 public:
  explicit Session(SessionOptions opts = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Overrides a module-level size before loading ("T", "64"); values parse as int, float,
  // True/False, else string.
  void set(const std::string& name, const std::string& value);
  // Reads, parses and runs a module's top level (definitions). Lines of asterisks, which
  // separate the traces of a Thunder printout, are read as comments. A module that fails to
  // load leaves the one loaded before in place.
  bool load_file(const std::string& path);
  bool load_string(const std::string& name, const std::string& text);
  // Parses (and unless parse_only, resolves names, loads the module and traces its entry
  // when the entry's inputs are typed) and reports every diagnostic found.
  bool check_file(const std::string& path, bool parse_only, const std::string& entry = "");

  // Joins the distributed job torchrun's variables describe (RANK, WORLD_SIZE, LOCAL_RANK,
  // LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT; `tracer launch` sets them): rank 0 serves the
  // job's store, and every rank waits for all the others, up to TRACER_DIST_TIMEOUT seconds
  // (default 300). Without RANK and WORLD_SIZE there is no job: true, nothing done. False, with
  // a diagnostic naming the bad variable or every rank that never arrived, on failure.
  bool join_job();
  std::optional<JobInfo> job() const;  // once joined
  // The ranks meet once more, so that rank 0 stops serving the store only when no rank needs it
  // any more; false, with a diagnostic, when a rank never arrives (it failed, or hangs). A
  // Session destroyed without it (its run failed) leaves at once: the others' leave_job() (or
  // their launcher) then reports it, and on rank 0 the store closes with it.
  bool leave_job();

  std::vector<std::string> functions() const;  // top-level functions, in source order
  // The requested entry if non-empty, else "main" if defined, else the last function.
  // Lets scripts' load() read files below dir, or save() write there (tracer run --allow-read,
  // --allow-write). Without, a script touches no file. Returns false when dir does not exist.
  bool allow_read(const std::string& dir);
  // The script's `argv` (as Python's sys.argv: the program's path, then its arguments).
  void set_argv(const std::vector<std::string>& argv);
  bool allow_write(const std::string& dir);
  // Whether the loaded module is a script: its top level does more than define things (an
  // expression statement, a loop, an if, a with). tracer run runs a script's top level and
  // traces no entry unless one is named.
  bool is_script() const;
  std::optional<std::string> entry(const std::string& requested);

  // Tensor files for inputs: NAME=FILE.npy, or FILE.safetensors (all its tensors by name).
  bool add_input(const std::string& name, const std::string& path);

  // Passes to apply after tracing, validated by name: the standard ones (stdlib/passes) and
  // every public function of the files given to add_pass_file. An entry may give the pass
  // keyword options: "fsdp(zero=3, prefetch=2)" (docs/passes.md).
  bool add_pass_file(const std::string& path);
  // A .trace file whose public functions every module loaded after it sees by name, as Thunder's
  // executors' operators are seen: the custom ops (a user's apply_rope) a printout calls without
  // defining them. Each is traced into the printout's trace like any other function.
  bool add_ops_file(const std::string& path);
  bool set_passes(const std::vector<std::string>& passes);
  std::vector<std::string> known_passes() const;
  // verify: run the IR verifier after each pass; print_after: pass names (or "all") whose
  // result is printed through SessionOptions::print. False (with an error naming the nearest
  // pass) when print_after names no known pass.
  bool set_pass_options(bool verify, const std::vector<std::string>& print_after);
  const std::vector<PassInfo>& pass_timings() const;

  std::optional<std::string> print(const std::string& entry);
  // Whether the entry's inputs all have types (annotations, a printout's comments, --type,
  // inputs); false with the reason where one has none (a printout without type strings).
  bool inputs_typed(const std::string& entry, std::string* why);
  // The loaded module's source printed back from its syntax tree, in one canonical form
  // (comments and Thunder's type comments kept): for a printout that cannot be traced.
  std::optional<std::string> print_source() const;
  std::optional<RunReport> run(const std::string& entry, const std::string& output_dir = "");
  // "cpu" (the default), "cuda" or "cuda:N". A GPU that cannot be opened (no driver, no device,
  // a driver too old) is an error here, not a silent fall back to the CPU.
  bool set_device(const std::string& device);
  // run() then times `runs` more runs of the whole program (forward and backward) after it.
  void set_bench(int runs);
  // On a GPU: capture the whole program as one CUDA graph after a warm-up run, then report
  // the outputs of its first replay and time replays (set_bench). A program that needs the CPU
  // for some statement is not captured: a warning says why and it runs without a graph.
  void set_cuda_graph(bool on);
  // The memory estimate of the program after the session's passes. device "cuda" counts each
  // allocation as the CUDA allocator does (its 512-byte and 2 MiB granules), "cpu" exactly.
  std::optional<MemoryReport> memory(const std::string& entry, const std::string& device = "cpu");
  // Generates the CUDA kernels of the program (after the session's passes, then `fuse` unless
  // the passes include it) and writes them to out_dir: CUDA C++ (emit "cuda"), PTX ("ptx") or
  // cubins for arch ("cubin", through NVRTC loaded at run time; no GPU is needed).
  std::optional<CompileReport> compile(const std::string& entry, const std::string& arch, const std::string& emit,
                                       const std::string& out_dir);

  // ---- interactive use (the REPL) ----
  // Runs `text` as one more chunk of the session's module (an empty one if none is loaded): the
  // names it assigns and defines join the module, and functions defined earlier see them. If its
  // last statement is an expression, *shown gets the value for display: a tensor's summary, a
  // trace printed as code, any other value's repr ("" for None).
  bool eval(const std::string& name, const std::string& text, std::string* shown);
  // Makes the running script fail with "interrupted" at its next step. Safe in a signal handler.
  void interrupt();
  // The documentation of a name: a function of the module, a builtin or native, a prims op, an
  // ltorch function or a pass (signature first, then its docstring). nullopt if nothing has it.
  std::optional<std::string> help(const std::string& name);
  // Names that complete `prefix` (the REPL's Tab): the module's globals, builtins and natives,
  // and after "prims.", "ltorch." or "native." those namespaces' members. Sorted, distinct.
  std::vector<std::string> completions(const std::string& prefix) const;
  // The parameter names of a function of the module, in order (a diagnostic if there is none).
  std::optional<std::vector<std::string>> parameters(const std::string& entry);
  // The type an input is traced with, as a type string ("f32[4, 8]"), like an input file gives.
  bool set_input_type(const std::string& name, const std::string& type);
  void clear_input_types();

  const std::vector<DiagnosticInfo>& diagnostics() const;
  std::string rendered_diagnostics() const;
  void clear_diagnostics();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  friend struct SessionAccess;  // the C API (api/c_api.cpp) builds on the session's state
};

}  // namespace tracer
