// The tree-walking interpreter: runs modules, calls functions eagerly on tensors, and records
// traces when functions are called on proxies.
#pragma once
#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <tuple>
#include <unordered_set>
#include <memory>
#include <string>
#include <vector>

#include "common/source.h"
#include "interpreter/resolve.h"
#include "interpreter/device.h"
#include "interpreter/value.h"
#include "ir/op.h"
#include "stdlib/stdlib.h"

namespace tracer::interp {

struct TracebackEntry {
  std::string function;
  SourceLoc call_site;
  std::string note;  // replaces "in a call to 'f' from here" when set
};

// A runtime error in a script: message, innermost location and the calls that led there.
struct ScriptError {
  std::string message;
  SourceLoc loc;
  std::vector<TracebackEntry> traceback;  // innermost call first
};

// A script error as a diagnostic with one note per calling frame.
Diagnostic to_diagnostic(const ScriptError& e);

struct Options {
  int64_t step_limit = 500'000'000;  // statements and calls; 0 means no limit
  int max_depth = 200;              // nested calls
  uint64_t seed = 0;
  // Bytes of tensor storage, and the most one list, tuple or string may take (check_size);
  // 0: 90% of physical memory.
  size_t memory_limit = 0;
};

struct Frame {
  const FuncInfo* info = nullptr;
  Module* module = nullptr;
  std::vector<Value> slots;
  const FunctionObj* fn = nullptr;  // closure cells live here
  bool naming = true;               // assignments may name traced values (user code)
  Value ret;
};

enum class Flow { Normal, Break, Continue, Return };

using ScriptProfile = std::unordered_map<const FuncInfo*, std::pair<long long, double>>;

// Recording state while a function is traced.
struct Recorder {
  ir::Trace* trace = nullptr;
  std::vector<std::vector<ir::Stmt>*> scopes;  // innermost last; scopes[0] is the trace body
  std::string region;
  int region_id = 0;
  int region_count = 0;
  // A compiled function's trace: a concrete tensor an op meets (one the function closes over)
  // becomes an input of the trace, made by this; unset elsewhere (an error then).
  std::function<ir::ProxyPtr(const rt::Tensor&)> capture;
  // A printout's source comment ("# model.py:12: x = self.fc(x)") read above the statement being
  // run: it goes to the next statement recorded at the top of the trace.
  std::string source{};
  // Thunder's collections (a backward printout's saved_for_backward and its tuples): a tensor
  // unpacked from one stays alive while an uncleared collection that a name holds still holds it
  // (clear_collection / clear_mutable_collection, or the names' dels, let it go), as Thunder's
  // memory tool counts it: its `del` is recorded where the last reference goes.
  Frame* frame = nullptr;                          // the traced function's frame
  std::unordered_set<const Object*> collections{};  // the collection tuples
  std::unordered_set<const Object*> cleared{};
  std::vector<ir::ProxyPtr> held{};                // deleted by name, still held by a collection
  // Values whose del waited for a write into their tensor (ir::Storage::current_deleted): deleted
  // after the next statement at the top of the trace.
  std::vector<ir::ProxyPtr> pending_dels{};
  // Where the statements of the assignment being run begin (its targets name their outputs).
  size_t assign_mark = SIZE_MAX;
  bool grad_off = false;  // the region is set_grad_enabled(False)'s
  // Tensors read after a write into their storage, and what they read as (Interpreter::
  // current_alias): the root's write count then, and the new value.
  std::unordered_map<const ir::Proxy*, std::tuple<ir::ProxyPtr, int, ir::ProxyPtr>> refreshed{};
};

class Interpreter {
 public:
  Interpreter(SourceManager& sm, Options opts = {});
  ~Interpreter();
  // The heap of this interpreter's containers: a host that makes lists, tuples or dicts for it
  // opens a HeapScope on it so that cycles among them are collected too (others are never).
  ContainerHeap& heap() { return heap_; }
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Parses, resolves and runs a module. pinned values replace the module's own top-level
  // assignments to those names (command-line --set). Returns null if diagnostics hold errors.
  // names_values: assignments name traced values (true for user programs, false for passes).
  std::shared_ptr<Module> load(const std::string& name, std::string text, DiagnosticList& diags,
                               const std::map<std::string, Value>& pinned = {}, bool names_values = true);
  // Parses and resolves without running (tracer check --parse-only runs only this). With
  // `globals`, the module shares that store (a chunk of an interactive session). With
  // `once_key`, text that stays the same for the process's life (the embedded stdlib's, named by
  // its address) is parsed once a process and copied (parse::parse_module_once).
  std::shared_ptr<Module> parse(const std::string& name, std::string text, DiagnosticList& diags,
                                std::shared_ptr<Globals> globals = nullptr, const void* once_key = nullptr);
  // Runs `text` as one more chunk of module `into`: its names join into's globals. If the last
  // statement is an expression, *value gets its value (else None). Returns the chunk's module, or
  // null with diagnostics.
  std::shared_ptr<Module> load_chunk(const std::string& name, std::string text, DiagnosticList& diags,
                                     const Module& into, Value* value);
  // Makes the running script fail with "interrupted" at its next step (from a signal handler or
  // another thread); cleared when the failure is raised.
  void interrupt() { interrupted_.store(true); }
  void clear_interrupt() { interrupted_.store(false); }
  void run_module(Module& m);  // throws ScriptError

  Value call(const Value& fn, CallArgs args, SourceLoc loc);  // throws ScriptError
  // Traces fn on proxies whose types come from its annotations, type comments, or given.
  std::shared_ptr<ir::Trace> trace(const FunctionObj& fn, const std::map<std::string, ir::TensorType>& given);
  // Calls fn on args (which hold t's input proxies) while recording into t, whose output
  // becomes what fn returns (jit and value_and_grad: interpreter/compiled.cpp); loc is the call's.
  void record_call(const FunctionObj& fn, CallArgs& args, ir::Trace& t, SourceLoc loc,
                   std::function<ir::ProxyPtr(const rt::Tensor&)> capture = nullptr);
  // The tensor types of fn's inputs (flattened; list-typed parameters give name_0, name_1, ...).
  std::vector<std::pair<std::string, ir::TensorType>> input_types(
      const FunctionObj& fn, const std::map<std::string, ir::TensorType>& given);

  // Like to_diagnostic, but an error inside the stdlib is reported at the user's call into it,
  // with the stdlib's line as a note.
  Diagnostic diagnose(const ScriptError& e) const;
  SourceManager& sources() { return sm_; }
  // Passes by name: the stdlib's (stdlib/passes) and those registered from the user's files.
  const Value* find_pass(const std::string& name);
  std::vector<std::string> pass_names();
  void register_pass(const std::string& name, Value fn) { passes_[name] = std::move(fn); }
  // A name every module sees, as Thunder's executors' operators are seen (a custom op a printout
  // calls, from a file the host gives: Session::add_ops_file).
  void define_op_name(const std::string& name, Value fn);
  // A host function (the embedding API's natives), visible as a builtin to modules loaded
  // afterwards; replaces a native of the same name.
  void register_native(std::shared_ptr<const NativeDef> def);
  // A host's primitive (the embedding API's native ops): callable as native.NAME, recorded in
  // traces as such, run on the CPU by its kernel. Replaces an op of the same name for later
  // calls; traces recorded before keep the one they named.
  const ir::OpDecl& register_op(ir::OpDecl op);
  const Options& options() const { return opts_; }
  // Files load() may read and save() may write: those below these directories (none by default:
  // a script touches no file unless the host grants it; interpreter/files.cpp).
  void allow_read(const std::string& dir);
  void set_argv(const std::vector<std::string>& argv);  // the builtin argv (default [])
  void allow_write(const std::string& dir);
  const std::vector<std::string>& allowed_read() const { return allowed_read_; }
  const std::vector<std::string>& allowed_write() const { return allowed_write_; }
  // Modules loaded from now on are the program being run (`__name__ == "__main__"`), or not.
  void set_main_program(bool on) { main_program_ = on; }
  rt::Allocator& allocator() { return allocator_; }
  // Fails at loc when a value of `elements` items of `item_bytes` each (a list's slots, a
  // string's characters) would take more than the memory limit: `[0] * 10**10` and
  // `"a" * 10**11` are located errors, not an allocation that takes the machine's memory.
  void check_size(uint64_t elements, size_t item_bytes, const char* what, SourceLoc loc);
  // Long loops inside builtins (iterating a range, sum, sorting, repeating a sequence, joining)
  // call this per item: every 4096 calls it looks at the interrupt flag, so Ctrl-C and
  // tracer_interrupt stop them too, not only the script's own steps.
  void poll(SourceLoc loc) {
    if ((++polls_ & 0xfff) == 0 && interrupted_.load(std::memory_order_relaxed)) raise_interrupt(loc);
  }
  ir::ExecContext& exec_context() { return exec_; }
  // Devices for compiled functions and t.cuda() (interpreter/device.h): the host installs an
  // opener (the Session API installs codegen's GPU executor); without one, a device other than
  // "cpu" is an error that says so. The backends the opener gives are the host's, and outlive
  // this interpreter's tensors (the host destroys the interpreter first).
  void set_device_opener(DeviceOpener o) { device_opener_ = std::move(o); }
  // The backend of "cuda" / "cuda:N" (opened at the first use), or a located error.
  DeviceBackend* device_backend(const std::string& name, SourceLoc loc);
  // The device jit and value_and_grad compile for when their device= is not given.
  std::string default_device = "cpu";
  // The distributed job this interpreter runs in (dist.group(), dist.rank(), Thunder's printed
  // process groups; interpreter/dist.cpp): size 0 while unknown (no job, no --world-size).
  void set_world(int64_t size, int64_t rank) {
    world_size_ = size;
    world_rank_ = rank;
  }
  int64_t world_size() const { return world_size_; }
  int64_t world_rank() const { return world_rank_; }
  // ('world', N): N the job's size, else the one module m's collectives imply, else 1.
  Value world_group(const Module* m);
  // The value of a Thunder printout's object name (a process group, a reduce op), or null.
  const Value* thunder_object(const std::string& name, const Module& m);
  static bool is_thunder_object_name(const std::string& name);
  // globals()['__function_obj']: the module a Thunder prologue reads its parameters from, bound
  // while trace() records such a prologue (None otherwise).
  const Value& function_obj() const { return function_obj_; }
  std::function<void(const std::string&)> on_print;  // print(); defaults to stdout
  // tracer check: an nvFuser definition's symbolic sizes (-1) that nothing gives are traced as
  // this size (0: they are an error), and the inputs so typed are listed in placeholder_inputs.
  int64_t symbolic_placeholder = 0;
  std::vector<std::string> placeholder_inputs;
  const NamespaceObj& builtins() const { return *builtins_.as<NamespaceObj>(); }
  int64_t steps() const { return steps_; }
  // The step limit counts from here (an embedding host's call starts a new count).
  void reset_steps() { steps_ = 0; }

  // Used by builtins and op glue.
  [[noreturn]] void fail(SourceLoc loc, const std::string& msg);
  bool tracing() const { return rec_.trace != nullptr; }
  // torch.set_grad_enabled(enabled) while tracing: False opens a 'no_grad' region, True closes
  // the one False opened (tensor_glue.cpp).
  void set_grad_enabled(bool enabled, SourceLoc loc);
  // A traced tensor as a program reads it now: a tensor written in place since it was made (it,
  // its root or an alias of its root, by prims.copy_ or an in-place op) reads as its tensor's
  // value after the write, as PyTorch's tensors do (the root's current value, or the same view
  // ops replayed on it through prims.update_aliases); otherwise p itself (interpreter/aliases.cpp).
  ir::ProxyPtr current_alias(const ir::ProxyPtr& p, SourceLoc loc);
  Value fresh_value(const Value& v, SourceLoc loc);
  // A name's value as it is read: brought up to date in its slot where refreshes() says so.
  void refresh(Value& v, const Frame& fr, SourceLoc loc) {
    if (refreshes(v, fr)) v = fresh_value(v, loc);
  }
  // Whether a name's value is read through current_alias: a traced tensor with aliases, read by
  // a program's own code, not as an argument of prims.update_aliases (which reads what it is given).
  bool refreshes(const Value& v, const Frame& fr) const {
    if (!v.is(VT::Proxy) || !fr.naming || reading_aliases_) return false;
    const ir::Proxy& p = *v.as<ProxyObj>()->p;
    return p.view || p.storage;
  }
  // The trace being recorded into (by tracing or "with recording(t):"), or null.
  ir::Trace* recording_trace() const { return rec_.trace; }
  void record(ir::Stmt s);  // appends to the innermost recording scope
  const ir::Stmt& last_recorded() const { return rec_.scopes.back()->back(); }
  Value call_op(const ir::OpDecl& op, CallArgs args, SourceLoc loc);
  Value call_ltorch(const std::string& name, CallArgs args, SourceLoc loc);
  void note_view(const ir::Stmt& st);  // a view prim's output: ir::Proxy::view
  // p's del, recorded after the statement being recorded at the top of the trace.
  void record_del(ir::ProxyPtr p) { rec_.pending_dels.push_back(std::move(p)); }
  Value get_attr(const Value& obj, const std::string& name, SourceLoc loc);
  Value binary(ast::Op op, const Value& a, const Value& b, SourceLoc loc);
  Value subscript(const Value& obj, const Value& index, SourceLoc loc);
  bool contains(const Value& container, const Value& x, SourceLoc loc);
  std::vector<Value> iterate(const Value& v, SourceLoc loc);
  bool truth(const Value& v, SourceLoc loc);
  int compare(const Value& a, const Value& b, SourceLoc loc);  // -1, 0, 1 for sortable values
  Value make_region(const std::string& name);

 private:
  friend class Evaluator;
  SourceManager& sm_;
  Options opts_;
  // The lists, tuples and dicts this interpreter makes (declared before every member that holds
  // values, so it outlives them); HeapScope opens it in each entry point below.
  ContainerHeap heap_;
  rt::Allocator allocator_;
  ir::ExecContext exec_;
  Value builtins_;   // NamespaceObj of names visible everywhere
  Value ltorch_;     // NamespaceObj of the stdlib composites (falls back to prims)
  // Tensor properties ltorch defines (its __properties__: "T" -> a function of the tensor).
  std::unordered_map<std::string, Value> tensor_properties_;
  Value dist_;       // NamespaceObj dist: the world (C++) and the collectives (stdlib/dist.trace)
  Value optim_;      // NamespaceObj optim: optimizers, schedules, clipping (stdlib/optim.trace)
  std::unordered_set<const Object*> pending_collections_;  // trace(): the collection tuples made for record_call
  Value function_obj_;  // function_obj()
  // The ops reached as members of an overload-packet namespace (torch.ops.aten.mul): their
  // attributes name ATen's overloads (get_attr). Stdlib objects, alive as long as the interpreter.
  std::unordered_set<const Object*> overload_packets_;
  // prims.update_aliases and Thunder's update_aliases: their arguments are read as they are.
  std::unordered_set<const Object*> alias_readers_;
  bool reading_aliases_ = false;
  // TRACER_PROFILE_SCRIPTS: calls and inclusive milliseconds per script function (eval.cpp).
  std::unique_ptr<ScriptProfile> profile_;
  Value executors_;  // NamespaceObj executors: Thunder's bare names (stdlib/thunder.trace), before ltorch
  std::vector<std::shared_ptr<Module>> modules_;
  std::vector<int32_t> stdlib_files_;
  std::map<std::string, Value> passes_;
  std::deque<ir::OpDecl> host_ops_;  // stable addresses: statements point at them
  DeviceOpener device_opener_;
  std::map<std::string, DeviceBackend*> backends_;  // by the name asked for
  FunctionRegistry functions_;  // every live function, to break closure cycles at the end
  Recorder rec_;
  int64_t steps_ = 0;
  int depth_ = 0;
  bool main_program_ = false;
  int loading_ = 0;  // modules being loaded (run) now: nested ones are load_module's
  std::vector<std::string> allowed_read_, allowed_write_;
  int64_t world_size_ = 0, world_rank_ = 0;
  std::map<std::tuple<int32_t, int64_t, std::string>, Value> thunder_objects_;  // thunder_object's values

  void install_builtins();
  void load_stdlib();
  void load_stdlib_passes();
  void install_thunder_names(const Module& m);  // stdlib_load.cpp
  void install_thunder_functions(const Module& m);
  void install_nvfuser_names(const Module& m);
  std::shared_ptr<Module> load_stdlib_file(const stdlib::File& file);
  bool passes_loaded_ = false;
  Value call_function(const FunctionObj& f, CallArgs& args, SourceLoc loc);
  Value call_composite(const FunctionObj& f, CallArgs& args, SourceLoc loc);
  void bind_params(const FunctionObj& f, CallArgs& args, Frame& frame, SourceLoc loc);
  Flow exec_block(const ast::Block& b, Frame& fr);
  Flow exec_stmt(const ast::Stmt& s, Frame& fr);
  Value eval(const ast::Expr& e, Frame& fr);
  // The less frequent expression kinds, out of line so that eval's own frame stays small.
  Value eval_other(const ast::Expr& e, Frame& fr);
  void assign(const ast::Expr& target, Value v, Frame& fr, bool naming);
  Value make_function(const FuncInfo& info, Frame& fr, SourceLoc loc);
  Flow exec_with(const ast::Stmt& s, Frame& fr);
  Flow exec_fusion(const ast::Stmt& s, Frame& fr);
  void exec_import(const ast::Stmt& s, Frame& fr);
  Value eval_call(const ast::Expr& e, Frame& fr);
  Value eval_list_comp(const ast::Expr& e, Frame& fr);
  Value load_name(const ast::Expr& e, Frame& fr);
  bool name_defined(const ast::Expr& e, Frame& fr);  // load_name would find a value
  void push_stmt(ir::Stmt st);  // into the innermost scope, with a pending source comment
  bool collection_holds(const Frame& fr, const ir::Proxy* p) const;
  // The held tensors that nothing holds any more, as one Del statement.
  void release_collections(const Frame& fr, SourceLoc loc);

 public:
  void clear_collection(const Value& v, SourceLoc loc);  // clear_collection(x) while tracing

 private:
  Value resolve_module_path(const std::string& path, SourceLoc loc);
  void tick(SourceLoc loc) {
    if (++steps_ > opts_.step_limit && opts_.step_limit > 0) step_limit_exceeded(loc);
    if (interrupted_.load(std::memory_order_relaxed)) raise_interrupt(loc);
  }
  [[noreturn]] void raise_interrupt(SourceLoc loc);
  std::atomic<bool> interrupted_{false};
  uint32_t polls_ = 0;
  [[noreturn]] void step_limit_exceeded(SourceLoc loc);
  friend struct InterpAccess;
};

// Turns a script value into a statement argument (nested tuples/lists of numbers, strings,
// dtypes, tensors, proxies); returns false if it has no such form.
bool to_arg(const Value& v, ir::Arg* out);
Value from_arg(const ir::Arg& a);
// The values a write through a view (prims.copy_) left in body as its tensor's new value that are
// not among outputs (tensor_glue.cpp): a later prims.update_aliases reads them.
std::vector<ir::ProxyPtr> hidden_alias_values(const std::vector<ir::Stmt>& body, const std::vector<ir::ProxyPtr>& outputs);

}  // namespace tracer::interp
