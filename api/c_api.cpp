// The C API (include/tracer/tracer.h) over the session's state. Every entry point catches
// everything: a C++ exception becomes a status and a message, never an unwind into C.
#include "tracer/tracer.h"

#include <dlpack/dlpack.h>

#include <atomic>
#include <cstring>
#include <map>
#include <new>

#include "api/session_impl.h"
#include "runtime/cuda.h"
#include "runtime/kernel_util.h"

using tracer::Session;
using tracer::SessionAccess;
namespace interp = tracer::interp;
namespace ir = tracer::ir;
namespace rt = tracer::rt;
using interp::Value;
using interp::VT;

// Handles keep their state's core alive (a reference each), so a tensor or function released
// after tracer_close still finds the allocator its memory came from.
struct tracer_tensor {
  std::atomic<int> refs{1};
  tracer_state* S;
  rt::Tensor t;
  std::vector<int64_t> shape;  // t's shape, as the C API hands it out
  tracer_tensor(tracer_state* s, rt::Tensor x) : S(s), t(std::move(x)), shape(t.shape().begin(), t.shape().end()) {}
};

// A program traced for one signature of inputs, after the passes, for one device.
struct TracedProgram {
  interp::Traces prog;
};

struct tracer_function {
  std::atomic<int> refs{1};
  tracer_state* S = nullptr;
  Value fn;  // the FunctionObj (keeps its module alive)
  std::map<std::string, TracedProgram> programs;  // by signature, passes and device
};

struct tracer_state {
  std::atomic<int> refs{1};  // the host's (until tracer_close) and one per live handle
  tracer_config cfg{};
  std::string help_text;     // tracer_help's last answer
  std::unique_ptr<Session> session;
  SessionAccess::Impl* impl = nullptr;
  std::string last_error;
  std::string rendered;
  size_t diags_forwarded = 0;  // diagnostics handed to cfg.diagnostic so far
  std::vector<std::string> passes;
  std::string device = "cpu";
  std::string native_error;  // set by tracer_native_error inside a native
  int live_functions = 0;
};

namespace {

void state_ref(tracer_state* S) { S->refs.fetch_add(1); }
void state_unref(tracer_state* S) {
  if (S->refs.fetch_sub(1) == 1) delete S;
}

tracer_status fail(tracer_state* S, tracer_status st, const std::string& msg) {
  if (S) S->last_error = msg;
  return st;
}

// Hands the diagnostics recorded since the last call to the host's callback.
void forward_diagnostics(tracer_state* S) {
  const auto& ds = S->impl->diags;
  if (S->diags_forwarded > ds.size()) S->diags_forwarded = 0;  // cleared meanwhile
  for (; S->diags_forwarded < ds.size(); ++S->diags_forwarded) {
    if (!S->cfg.diagnostic) continue;
    const tracer::DiagnosticInfo& d = ds[S->diags_forwarded];
    tracer_diagnostic c{d.severity == "error" ? TRACER_SEVERITY_ERROR : d.severity == "warning" ? TRACER_SEVERITY_WARNING
                                                                                              : TRACER_SEVERITY_NOTE,
                        d.file.c_str(), d.line, d.column, d.message.c_str(), d.rendered.c_str()};
    S->cfg.diagnostic(S->cfg.user, &c);
  }
}

// The first error diagnostic added since `from` (its message), for tracer_last_error.
std::string first_error_since(tracer_state* S, size_t from, const std::string& fallback) {
  const auto& ds = S->impl->diags;
  for (size_t i = from; i < ds.size(); ++i)
    if (ds[i].severity == "error") return ds[i].rendered.empty() ? ds[i].message : ds[i].rendered;
  return fallback;
}

// Runs body, turning exceptions into statuses; forwards new diagnostics either way.
template <class F> tracer_status guarded(tracer_state* S, F&& body) {
  if (!S) return TRACER_ERROR_ARGUMENT;
  S->last_error.clear();
  tracer_status st;
  try {
    st = body();
  } catch (const std::bad_alloc&) {
    st = fail(S, TRACER_ERROR_MEMORY, "out of memory");
  } catch (const rt::OutOfMemory& e) {
    st = fail(S, TRACER_ERROR_MEMORY, e.what());
  } catch (const rt::cuda::CudaError& e) {
    st = fail(S, TRACER_ERROR_DEVICE, e.what());
  } catch (const std::exception& e) {
    st = fail(S, TRACER_ERROR_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    st = fail(S, TRACER_ERROR_INTERNAL, "internal error: an unknown exception");
  }
  try {
    forward_diagnostics(S);
  } catch (...) {
  }
  return st;
}

bool dtype_from_c(int dt, rt::DType* out) {
  switch (dt) {
    case TRACER_F32: *out = rt::DType::f32; return true;
    case TRACER_F64: *out = rt::DType::f64; return true;
    case TRACER_F16: *out = rt::DType::f16; return true;
    case TRACER_BF16: *out = rt::DType::bf16; return true;
    case TRACER_I8: *out = rt::DType::i8; return true;
    case TRACER_U8: *out = rt::DType::u8; return true;
    case TRACER_I32: *out = rt::DType::i32; return true;
    case TRACER_I64: *out = rt::DType::i64; return true;
    case TRACER_BOOL: *out = rt::DType::b8; return true;
  }
  return false;
}

tracer_dtype dtype_to_c(rt::DType d) {
  switch (d) {
    case rt::DType::f32: return TRACER_F32;
    case rt::DType::f64: return TRACER_F64;
    case rt::DType::f16: return TRACER_F16;
    case rt::DType::bf16: return TRACER_BF16;
    case rt::DType::i8: return TRACER_I8;
    case rt::DType::u8: return TRACER_U8;
    case rt::DType::i32: return TRACER_I32;
    case rt::DType::i64: return TRACER_I64;
    case rt::DType::b8: return TRACER_BOOL;
  }
  return TRACER_F32;
}

bool shape_from_c(int ndim, const int64_t* shape, rt::Shape* out, std::string* why) {
  if (ndim < 0 || ndim > 64) {
    *why = "ndim must be between 0 and 64, got " + std::to_string(ndim);
    return false;
  }
  if (ndim > 0 && !shape) {
    *why = "shape is null";
    return false;
  }
  out->assign(shape, shape + ndim);
  for (int64_t d : *out)
    if (d < 0) {
      *why = "negative size in shape " + rt::shape_str(*out);
      return false;
    }
  return true;
}

// The checks tensor_new and tensor_borrow share: out given (and cleared), dtype and shape valid.
tracer_status tensor_type(tracer_state* S, const char* fn, int dt, int ndim, const int64_t* shape, tracer_tensor** out,
                          rt::DType* d, rt::Shape* sh) {
  if (!out) return fail(S, TRACER_ERROR_ARGUMENT, std::string(fn) + ": out is null");
  *out = nullptr;
  if (!dtype_from_c(dt, d)) return fail(S, TRACER_ERROR_ARGUMENT, "unknown dtype " + std::to_string(dt));
  std::string why;
  if (!shape_from_c(ndim, shape, sh, &why)) return fail(S, TRACER_ERROR_ARGUMENT, why);
  return TRACER_OK;
}

bool is_identifier(const std::string& name) {
  bool ok = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0]));
  for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  return ok;
}

tracer_tensor* new_handle(tracer_state* S, rt::Tensor t) {
  auto* h = new tracer_tensor(S, std::move(t));
  state_ref(S);
  return h;
}

// A script value as a result entry (tensors: a new handle); false for kinds the C API has none
// of. Nested tuples and lists are flattened in order.
bool flatten_value(tracer_state* S, const Value& v, std::vector<tracer_value>& out, std::string* why) {
  switch (v.type()) {
    case VT::None: out.push_back(tracer_value{TRACER_NONE, {0}}); return true;
    case VT::Bool: out.push_back(tracer_value_bool(v.as_bool())); return true;
    case VT::Int: out.push_back(tracer_value_int(v.as_int())); return true;
    case VT::Float: out.push_back(tracer_value_float(v.as_float())); return true;
    case VT::Tensor: out.push_back(tracer_value_tensor(new_handle(S, v.as<interp::TensorObj>()->t))); return true;
    case VT::Tuple:
      for (const Value& x : v.as<interp::TupleObj>()->items)
        if (!flatten_value(S, x, out, why)) return false;
      return true;
    case VT::List:
      for (const Value& x : v.as<interp::ListObj>()->items)
        if (!flatten_value(S, x, out, why)) return false;
      return true;
    default:
      *why = std::string("a result is a ") + interp::type_name(v.type()) +
             ", which the C API cannot return (tensors, numbers, bools and None, in tuples and lists)";
      return false;
  }
}

bool flatten_arg(tracer_state* S, const ir::Arg& a, std::vector<tracer_value>& out, std::string* why) {
  using K = ir::Arg::Kind;
  switch (a.kind) {
    case K::None: out.push_back(tracer_value{TRACER_NONE, {0}}); return true;
    case K::Bool: out.push_back(tracer_value_bool(a.b)); return true;
    case K::Int: out.push_back(tracer_value_int(a.i)); return true;
    case K::Float: out.push_back(tracer_value_float(a.f)); return true;
    case K::Tensor: out.push_back(tracer_value_tensor(new_handle(S, a.tensor))); return true;
    case K::Tuple:
    case K::List:
      for (const auto& x : a.items)
        if (!flatten_arg(S, x, out, why)) return false;
      return true;
    default:
      *why = "a result of kind " + ir::print_arg(a) + " cannot be returned through the C API";
      return false;
  }
}

// Hands results to the caller, or (too many for `capacity`) releases them all.
tracer_status deliver(tracer_state* S, std::vector<tracer_value>& got, tracer_value* results, size_t capacity, size_t* n) {
  if (n) *n = got.size();
  if (got.size() > capacity || (!results && !got.empty())) {
    size_t count = got.size();
    tracer_values_release(got.data(), got.size());
    return fail(S, TRACER_ERROR_ARGUMENT,
                "the function returned " + std::to_string(count) + " values, more than the " + std::to_string(capacity) +
                    " the results array holds");
  }
  for (size_t i = 0; i < got.size(); ++i) results[i] = got[i];
  return TRACER_OK;
}

Value to_script(const tracer_value& v) {
  switch (v.kind) {
    case TRACER_BOOLEAN: return Value::boolean(v.as.boolean != 0);
    case TRACER_INT: return Value::integer(v.as.i);
    case TRACER_FLOAT: return Value::number(v.as.f);
    case TRACER_TENSOR: return Value(new interp::TensorObj(v.as.tensor->t));
    default: return Value();
  }
}

bool check_values(tracer_state* S, const tracer_value* args, size_t nargs, std::string* why) {
  if (nargs && !args) {
    *why = "args is null but nargs is " + std::to_string(nargs);
    return false;
  }
  for (size_t i = 0; i < nargs; ++i) {
    if (args[i].kind < TRACER_NONE || args[i].kind > TRACER_TENSOR) {
      *why = "argument " + std::to_string(i) + " has an unknown kind " + std::to_string(static_cast<int>(args[i].kind));
      return false;
    }
    if (args[i].kind == TRACER_TENSOR && !args[i].as.tensor) {
      *why = "argument " + std::to_string(i) + " is a null tensor";
      return false;
    }
  }
  return true;
}

std::string signature(const tracer_value* args, size_t nargs, const tracer_state* S) {
  std::string key = S->device + "|";
  for (const auto& p : S->passes) key += p + ",";
  key += "|";
  for (size_t i = 0; i < nargs; ++i) key += rt::dtype_name(args[i].as.tensor->t.dtype()) + rt::shape_str(args[i].as.tensor->t.shape()) + ";";
  return key;
}

// The names of f's flattened tensor inputs, for nargs tensors: from its annotations when they
// give the count, else its parameters one by one.
bool input_names(interp::Interpreter& in, const interp::FunctionObj& f, size_t nargs, std::vector<std::string>* names,
                 std::string* why) {
  try {
    auto types = in.input_types(f, {});
    if (types.size() == nargs) {
      for (const auto& [name, t] : types) names->push_back(name);
      return true;
    }
  } catch (const interp::ScriptError&) {
    // unannotated parameters: named one by one below
  }
  const auto& params = *f.info->params;
  if (params.size() != nargs) {
    *why = "'" + f.info->name + "' takes " + std::to_string(params.size()) + " inputs, got " + std::to_string(nargs) +
           " tensors (a parameter annotated as a list of N tensors takes N)";
    return false;
  }
  for (const auto& p : params) names->push_back(p.name);
  return true;
}

tracer_status call_eager(tracer_state* S, tracer_function* f, const tracer_value* args, size_t nargs,
                         std::vector<tracer_value>& got) {
  interp::Interpreter& in = *S->impl->in;
  interp::CallArgs ca;
  for (size_t i = 0; i < nargs; ++i) ca.pos.push_back(to_script(args[i]));
  size_t before = S->impl->diags.size();
  Value r;
  try {
    in.reset_steps();
    in.clear_interrupt();
    r = in.call(f->fn, std::move(ca), tracer::SourceLoc{});
  } catch (const interp::ScriptError& e) {
    S->impl->script_error(e);
    return fail(S, TRACER_ERROR_SCRIPT, first_error_since(S, before, e.message));
  }
  std::string why;
  if (!flatten_value(S, r, got, &why)) {
    tracer_values_release(got.data(), got.size());
    got.clear();
    return fail(S, TRACER_ERROR_TYPE, why);
  }
  return TRACER_OK;
}

tracer_status call_traced(tracer_state* S, tracer_function* f, const tracer_value* args, size_t nargs,
                          std::vector<tracer_value>& got) {
  for (size_t i = 0; i < nargs; ++i)
    if (args[i].kind != TRACER_TENSOR)
      return fail(S, TRACER_ERROR_TYPE,
                  "argument " + std::to_string(i) + " is not a tensor: with passes or on a GPU, a function is traced "
                  "and takes tensors only (numbers belong in the module, set with tracer_set_global)");
  SessionAccess::Impl& impl = *S->impl;
  interp::Interpreter& in = *impl.in;
  const auto& fn = *f->fn.as<interp::FunctionObj>();
  size_t before = impl.diags.size();
  std::string key = signature(args, nargs, S);
  auto it = f->programs.find(key);
  if (it == f->programs.end()) {
    std::vector<std::string> names;
    std::string why;
    if (!input_names(in, fn, nargs, &names, &why)) return fail(S, TRACER_ERROR_ARGUMENT, why);
    std::map<std::string, ir::TensorType> given;
    for (size_t i = 0; i < nargs; ++i)
      given[names[i]] = ir::TensorType{args[i].as.tensor->t.dtype(), args[i].as.tensor->t.shape(), "cpu"};
    std::shared_ptr<ir::Trace> t;
    try {
      in.reset_steps();
    in.clear_interrupt();
      t = in.trace(fn, given);
    } catch (const interp::ScriptError& e) {
      impl.script_error(e);
      return fail(S, TRACER_ERROR_SCRIPT, first_error_since(S, before, e.message));
    }
    if (!impl.verify_trace(*t, "tracing")) return fail(S, TRACER_ERROR_INTERNAL, first_error_since(S, before, "invalid trace"));
    if (t->inputs.size() != nargs)
      return fail(S, TRACER_ERROR_ARGUMENT, "'" + fn.info->name + "' traced with " + std::to_string(t->inputs.size()) +
                                                " inputs, called with " + std::to_string(nargs));
    interp::Traces prog{t};
    if (!S->passes.empty()) {
      try {
        prog = interp::run_passes(in, {t}, S->passes, impl.pass_opts, nullptr);
      } catch (const interp::PassError& e) {
        impl.add(e.diag);
        return fail(S, TRACER_ERROR_SCRIPT, first_error_since(S, before, "a pass failed"));
      }
    }
    it = f->programs.emplace(key, TracedProgram{std::move(prog)}).first;
  }
  std::vector<rt::Tensor> inputs;
  for (size_t i = 0; i < nargs; ++i) inputs.push_back(args[i].as.tensor->t);
  std::vector<std::pair<std::string, ir::Arg>> results;
  if (!impl.execute(it->second.prog, std::move(inputs), results))
    return fail(S, impl.gexec ? TRACER_ERROR_DEVICE : TRACER_ERROR_SCRIPT, first_error_since(S, before, "the run failed"));
  std::string why;
  for (const auto& [name, a] : results)
    if (!flatten_arg(S, a, got, &why)) {
      tracer_values_release(got.data(), got.size());
      got.clear();
      return fail(S, TRACER_ERROR_TYPE, why);
    }
  return TRACER_OK;
}

// DLPack export: the managed tensor keeps a reference to the handle.
struct DLExport {
  DLManagedTensor m{};
  tracer_tensor* t = nullptr;
  std::vector<int64_t> shape;
};

bool dl_dtype(rt::DType d, DLDataType* out) {
  switch (d) {
    case rt::DType::f32: *out = {kDLFloat, 32, 1}; return true;
    case rt::DType::f64: *out = {kDLFloat, 64, 1}; return true;
    case rt::DType::f16: *out = {kDLFloat, 16, 1}; return true;
    case rt::DType::bf16: *out = {kDLBfloat, 16, 1}; return true;
    case rt::DType::i8: *out = {kDLInt, 8, 1}; return true;
    case rt::DType::u8: *out = {kDLUInt, 8, 1}; return true;
    case rt::DType::i32: *out = {kDLInt, 32, 1}; return true;
    case rt::DType::i64: *out = {kDLInt, 64, 1}; return true;
    case rt::DType::b8: *out = {kDLUInt, 8, 1}; return true;  // DLPack 0.6 has no bool: one byte, 0 or 1
  }
  return false;
}

bool from_dl_dtype(DLDataType d, rt::DType* out) {
  if (d.lanes != 1) return false;
  if (d.code == kDLFloat && d.bits == 32) *out = rt::DType::f32;
  else if (d.code == kDLFloat && d.bits == 64) *out = rt::DType::f64;
  else if (d.code == kDLFloat && d.bits == 16) *out = rt::DType::f16;
  else if (d.code == kDLBfloat && d.bits == 16) *out = rt::DType::bf16;
  else if (d.code == kDLInt && d.bits == 8) *out = rt::DType::i8;
  else if (d.code == kDLUInt && d.bits == 8) *out = rt::DType::u8;
  else if (d.code == kDLInt && d.bits == 32) *out = rt::DType::i32;
  else if (d.code == kDLInt && d.bits == 64) *out = rt::DType::i64;
#if DLPACK_VERSION >= 80
  else if (d.code == kDLBool && d.bits == 8) *out = rt::DType::b8;
#endif
  else return false;
  return true;
}

}  // namespace

extern "C" {

int tracer_version(void) { return TRACER_API_VERSION; }

const char* tracer_status_name(tracer_status s) {
  switch (s) {
    case TRACER_OK: return "ok";
    case TRACER_ERROR_ARGUMENT: return "argument error";
    case TRACER_ERROR_VERSION: return "version mismatch";
    case TRACER_ERROR_NOT_FOUND: return "not found";
    case TRACER_ERROR_SCRIPT: return "script error";
    case TRACER_ERROR_TYPE: return "type error";
    case TRACER_ERROR_MEMORY: return "out of memory";
    case TRACER_ERROR_DEVICE: return "device error";
    case TRACER_ERROR_UNSUPPORTED: return "unsupported";
    case TRACER_ERROR_INTERNAL: return "internal error";
    case TRACER_STATUS_MAX_ENUM: break;
  }
  return "unknown status";
}

void tracer_config_init(tracer_config* cfg) {
  if (!cfg) return;
  *cfg = tracer_config{};
  cfg->api_version = TRACER_API_VERSION;
  cfg->step_limit = 500'000'000;
}

tracer_status tracer_open(const tracer_config* cfg, tracer_state** out) {
  if (!out) return TRACER_ERROR_ARGUMENT;
  *out = nullptr;
  tracer_config c;
  tracer_config_init(&c);
  if (cfg) c = *cfg;
  if (c.api_version / 10000 != TRACER_VERSION_MAJOR || c.api_version % 10000 / 100 > TRACER_VERSION_MINOR)
    return TRACER_ERROR_VERSION;
  if ((c.alloc == nullptr) != (c.free == nullptr)) return TRACER_ERROR_ARGUMENT;
  try {
    auto S = std::make_unique<tracer_state>();
    S->cfg = c;
    tracer::SessionOptions o;
    o.seed = c.seed;
    o.step_limit = c.step_limit;
    tracer_state* raw = S.get();
    if (c.output) o.print = [raw](const std::string& s) { raw->cfg.output(raw->cfg.user, s.data(), s.size()); };
    S->session = std::make_unique<Session>(o);
    S->impl = &SessionAccess::impl(*S->session);
    if (c.alloc) S->impl->in->allocator().set_hooks(rt::AllocHooks{c.alloc, c.free, c.user});
    *out = S.release();
    return TRACER_OK;
  } catch (const std::bad_alloc&) {
    return TRACER_ERROR_MEMORY;
  } catch (...) {
    return TRACER_ERROR_INTERNAL;
  }
}

void tracer_close(tracer_state* S) {
  if (!S) return;
  try {
    state_unref(S);  // the rest goes with the last handle
  } catch (...) {
  }
}

const char* tracer_last_error(const tracer_state* S) { return S ? S->last_error.c_str() : "null state"; }

size_t tracer_diagnostic_count(const tracer_state* S) { return S ? S->impl->diags.size() : 0; }

tracer_status tracer_diagnostic_get(const tracer_state* S, size_t i, tracer_diagnostic* out) {
  if (!S || !out || i >= S->impl->diags.size()) return TRACER_ERROR_ARGUMENT;
  const tracer::DiagnosticInfo& d = S->impl->diags[i];
  *out = tracer_diagnostic{d.severity == "error" ? TRACER_SEVERITY_ERROR : d.severity == "warning" ? TRACER_SEVERITY_WARNING
                                                                                                 : TRACER_SEVERITY_NOTE,
                           d.file.c_str(), d.line, d.column, d.message.c_str(), d.rendered.c_str()};
  return TRACER_OK;
}

const char* tracer_diagnostics_rendered(tracer_state* S) {
  if (!S) return "";
  try {
    S->rendered = S->session->rendered_diagnostics();
  } catch (...) {
    S->rendered.clear();
  }
  return S->rendered.c_str();
}

void tracer_clear_diagnostics(tracer_state* S) {
  if (!S) return;
  S->impl->diags.clear();
  S->diags_forwarded = 0;
}

tracer_status tracer_set_global(tracer_state* S, const char* name, const char* value) {
  return guarded(S, [&] {
    if (!name || !value || !*name) return fail(S, TRACER_ERROR_ARGUMENT, "tracer_set_global: name and value must be given");
    S->session->set(name, value);
    return TRACER_OK;
  });
}

tracer_status tracer_load_file(tracer_state* S, const char* path) {
  return guarded(S, [&] {
    if (!path) return fail(S, TRACER_ERROR_ARGUMENT, "tracer_load_file: path is null");
    size_t before = S->impl->diags.size();
    std::string text, why;
    if (!SessionAccess::Impl::read_file(path, &text, &why))
      return fail(S, TRACER_ERROR_NOT_FOUND, std::string("cannot read ") + path + ": " + why);
    if (!S->session->load_string(path, text))  // the text read above: the file is read once
      return fail(S, TRACER_ERROR_SCRIPT, first_error_since(S, before, "the module did not load"));
    return TRACER_OK;
  });
}

tracer_status tracer_load_string(tracer_state* S, const char* name, const char* text) {
  return guarded(S, [&] {
    if (!text) return fail(S, TRACER_ERROR_ARGUMENT, "tracer_load_string: text is null");
    size_t before = S->impl->diags.size();
    if (!S->session->load_string(name && *name ? name : "<string>", text))
      return fail(S, TRACER_ERROR_SCRIPT, first_error_since(S, before, "the module did not load"));
    return TRACER_OK;
  });
}

tracer_status tracer_function_get(tracer_state* S, const char* name, tracer_function** out) {
  return guarded(S, [&] {
    if (!name || !out) return fail(S, TRACER_ERROR_ARGUMENT, "tracer_function_get: name and out must be given");
    *out = nullptr;
    auto& m = S->impl->module;
    if (!m) return fail(S, TRACER_ERROR_NOT_FOUND, "no module is loaded");
    auto it = m->globals.find(name);
    if (it == m->globals.end() || !it->second.is(VT::Function))
      return fail(S, TRACER_ERROR_NOT_FOUND, std::string("no function named '") + name + "' in the module");
    auto* f = new tracer_function;
    f->S = S;
    f->fn = it->second;
    state_ref(S);
    *out = f;
    return TRACER_OK;
  });
}

void tracer_function_release(tracer_function* f) {
  if (!f || f->refs.fetch_sub(1) != 1) return;
  tracer_state* S = f->S;
  delete f;
  state_unref(S);
}

const char* tracer_dtype_name(tracer_dtype dt) {
  rt::DType d;
  return dtype_from_c(dt, &d) ? rt::dtype_name(d) : "?";
}

size_t tracer_dtype_size(tracer_dtype dt) {
  rt::DType d;
  return dtype_from_c(dt, &d) ? rt::dtype_size(d) : 0;
}

tracer_status tracer_tensor_new(tracer_state* S, tracer_dtype dt, int ndim, const int64_t* shape, const void* data,
                                tracer_tensor** out) {
  return guarded(S, [&] {
    rt::DType d;
    rt::Shape sh;
    tracer_status st = tensor_type(S, "tracer_tensor_new", dt, ndim, shape, out, &d, &sh);
    if (st != TRACER_OK) return st;
    rt::Tensor t = rt::Tensor::zeros(d, sh, &S->impl->in->allocator());
    if (data && t.nbytes()) std::memcpy(t.data(), data, t.nbytes());
    *out = new_handle(S, std::move(t));
    return TRACER_OK;
  });
}

tracer_status tracer_tensor_borrow(tracer_state* S, tracer_dtype dt, int ndim, const int64_t* shape, void* data,
                                   void (*release)(void*), void* ctx, tracer_tensor** out) {
  return guarded(S, [&] {
    rt::DType d;
    rt::Shape sh;
    tracer_status st = tensor_type(S, "tracer_tensor_borrow", dt, ndim, shape, out, &d, &sh);
    if (st != TRACER_OK) return st;
    if (!data && rt::numel(sh) > 0) return fail(S, TRACER_ERROR_ARGUMENT, "tracer_tensor_borrow: data is null");
    if (reinterpret_cast<uintptr_t>(data) % rt::dtype_size(d) != 0)
      return fail(S, TRACER_ERROR_ARGUMENT, std::string("tracer_tensor_borrow: data is not aligned to the size of ") + rt::dtype_name(d));
    // Armed once the handle exists: a failure (even out of memory making the handle) leaves the
    // memory the host's, and release is not called.
    auto armed = std::make_shared<bool>(false);
    std::function<void()> rel;
    if (release) rel = [release, ctx, armed] {
      if (*armed) release(ctx);
    };
    *out = new_handle(S, rt::Tensor::borrow(d, sh, data, std::move(rel)));
    *armed = true;
    return TRACER_OK;
  });
}

void tracer_tensor_retain(tracer_tensor* t) {
  if (t) t->refs.fetch_add(1);
}

void tracer_tensor_release(tracer_tensor* t) {
  if (!t || t->refs.fetch_sub(1) != 1) return;
  tracer_state* S = t->S;
  delete t;
  state_unref(S);
}

tracer_dtype tracer_tensor_dtype(const tracer_tensor* t) { return t ? dtype_to_c(t->t.dtype()) : TRACER_F32; }
int tracer_tensor_ndim(const tracer_tensor* t) { return t ? static_cast<int>(t->shape.size()) : 0; }
const int64_t* tracer_tensor_shape(const tracer_tensor* t) { return t ? t->shape.data() : nullptr; }
int64_t tracer_tensor_numel(const tracer_tensor* t) { return t ? t->t.numel() : 0; }
size_t tracer_tensor_nbytes(const tracer_tensor* t) { return t ? t->t.nbytes() : 0; }
const void* tracer_tensor_data(const tracer_tensor* t) { return t ? t->t.data() : nullptr; }
void* tracer_tensor_mutable_data(tracer_tensor* t) {
  return t && t->refs.load() == 1 && t->t.sole_owner() ? t->t.data() : nullptr;
}

tracer_status tracer_tensor_from_dlpack(tracer_state* S, DLManagedTensor* m, tracer_tensor** out) {
  // m is owned from here on: its deleter runs exactly once, when the tensor goes or at a failure
  // (also one inside new_handle, after the storage already holds it).
  auto done = std::make_shared<bool>(false);
  auto drop = [m, done] {
    if (m && m->deleter && !*done) {
      *done = true;
      m->deleter(m);
    }
  };
  if (!S) {
    drop();
    return TRACER_ERROR_ARGUMENT;
  }
  tracer_status st = guarded(S, [&] {
    if (!out || !m) return fail(S, TRACER_ERROR_ARGUMENT, "tracer_tensor_from_dlpack: m and out must be given");
    *out = nullptr;
    const DLTensor& t = m->dl_tensor;
    if (t.device.device_type != kDLCPU)
      return fail(S, TRACER_ERROR_UNSUPPORTED, "a DLPack tensor on device type " + std::to_string(t.device.device_type) +
                                                   ": only CPU tensors (kDLCPU) can be shared");
    rt::DType d;
    if (!from_dl_dtype(t.dtype, &d))
      return fail(S, TRACER_ERROR_UNSUPPORTED, "a DLPack tensor of dtype code " + std::to_string(t.dtype.code) + ", " +
                                                   std::to_string(t.dtype.bits) + " bits, " + std::to_string(t.dtype.lanes) +
                                                   " lanes has no tracer dtype");
    rt::Shape sh;
    std::string why;
    if (!shape_from_c(t.ndim, t.shape, &sh, &why)) return fail(S, TRACER_ERROR_ARGUMENT, "DLPack tensor: " + why);
    if (t.strides) {
      int64_t expect = 1;
      for (int i = t.ndim - 1; i >= 0; --i) {
        if (sh[i] != 1 && t.strides[i] != expect)
          return fail(S, TRACER_ERROR_UNSUPPORTED, "a DLPack tensor with strides that are not compact row-major: "
                                                       "copy it to a contiguous tensor first");
        expect *= sh[i];
      }
    }
    char* data = static_cast<char*>(t.data) + t.byte_offset;
    if (!data && rt::numel(sh) > 0) return fail(S, TRACER_ERROR_ARGUMENT, "a DLPack tensor with null data");
    if (reinterpret_cast<uintptr_t>(data) % rt::dtype_size(d) != 0)
      return fail(S, TRACER_ERROR_UNSUPPORTED, "a DLPack tensor whose data is not aligned to its element size");
    *out = new_handle(S, rt::Tensor::borrow(d, sh, data, drop));
    return TRACER_OK;
  });
  if (st != TRACER_OK) drop();
  return st;
}

tracer_status tracer_tensor_to_dlpack(tracer_tensor* t, DLManagedTensor** out) {
  if (!t || !out) return TRACER_ERROR_ARGUMENT;
  *out = nullptr;
  try {
    auto e = std::make_unique<DLExport>();
    e->shape = t->shape;
    e->t = t;
    DLTensor& d = e->m.dl_tensor;
    d.data = const_cast<void*>(t->t.data());
    d.device = {kDLCPU, 0};
    d.ndim = static_cast<int>(e->shape.size());
    dl_dtype(t->t.dtype(), &d.dtype);
    d.shape = e->shape.data();
    d.strides = nullptr;
    d.byte_offset = 0;
    e->m.manager_ctx = e.get();
    e->m.deleter = [](DLManagedTensor* self) {
      auto* x = static_cast<DLExport*>(self->manager_ctx);
      tracer_tensor_release(x->t);
      delete x;
    };
    tracer_tensor_retain(t);  // nothing can fail after this
    DLExport* raw = e.release();
    *out = &raw->m;
    return TRACER_OK;
  } catch (...) {
    return TRACER_ERROR_MEMORY;
  }
}

tracer_value tracer_value_tensor(tracer_tensor* t) {
  tracer_value v{TRACER_TENSOR, {0}};
  v.as.tensor = t;
  return v;
}
tracer_value tracer_value_int(int64_t i) {
  tracer_value v{TRACER_INT, {0}};
  v.as.i = i;
  return v;
}
tracer_value tracer_value_float(double f) {
  tracer_value v{TRACER_FLOAT, {0}};
  v.as.f = f;
  return v;
}
tracer_value tracer_value_bool(int b) {
  tracer_value v{TRACER_BOOLEAN, {0}};
  v.as.boolean = b != 0;
  return v;
}

void tracer_values_release(tracer_value* values, size_t n) {
  if (!values) return;
  for (size_t i = 0; i < n; ++i) {
    if (values[i].kind == TRACER_TENSOR) tracer_tensor_release(values[i].as.tensor);
    values[i] = tracer_value{TRACER_NONE, {0}};
  }
}

tracer_status tracer_set_passes(tracer_state* S, const char* passes) {
  return guarded(S, [&] {
    std::vector<std::string> ps;
    std::string cur;
    for (const char* c = passes ? passes : ""; ; ++c) {
      if (*c == ',' || *c == '\0') {
        size_t b = cur.find_first_not_of(" \t"), e = cur.find_last_not_of(" \t");
        if (b != std::string::npos) ps.push_back(cur.substr(b, e - b + 1));
        cur.clear();
        if (!*c) break;
      } else {
        cur += *c;
      }
    }
    size_t before = S->impl->diags.size();
    if (!S->session->set_passes(ps)) return fail(S, TRACER_ERROR_NOT_FOUND, first_error_since(S, before, "unknown pass"));
    S->passes = ps;
    return TRACER_OK;
  });
}

tracer_status tracer_set_device(tracer_state* S, const char* device) {
  return guarded(S, [&] {
    if (!device) return fail(S, TRACER_ERROR_ARGUMENT, "tracer_set_device: device is null");
    size_t before = S->impl->diags.size();
    if (!S->session->set_device(device)) {
      std::string d = device;
      bool bad_name = d != "cpu" && d.rfind("cuda", 0) != 0;
      return fail(S, bad_name ? TRACER_ERROR_ARGUMENT : TRACER_ERROR_DEVICE, first_error_since(S, before, "cannot use device " + d));
    }
    S->device = device;
    return TRACER_OK;
  });
}

tracer_status tracer_call(tracer_state* S, tracer_function* f, const tracer_value* args, size_t nargs,
                          tracer_value* results, size_t capacity, size_t* n) {
  return guarded(S, [&]() -> tracer_status {
    if (n) *n = 0;
    if (!f) return fail(S, TRACER_ERROR_ARGUMENT, "tracer_call: the function is null");
    if (f->S != S) return fail(S, TRACER_ERROR_ARGUMENT, "tracer_call: the function belongs to another state");
    std::string why;
    if (!check_values(S, args, nargs, &why)) return fail(S, TRACER_ERROR_ARGUMENT, why);
    std::vector<tracer_value> got;
    bool eager = S->passes.empty() && S->device == "cpu";
    tracer_status st = eager ? call_eager(S, f, args, nargs, got) : call_traced(S, f, args, nargs, got);
    if (st != TRACER_OK) return st;
    return deliver(S, got, results, capacity, n);
  });
}

tracer_status tracer_register_natives(tracer_state* S, const tracer_native* table, size_t n) {
  return guarded(S, [&] {
    if (n && !table) return fail(S, TRACER_ERROR_ARGUMENT, "tracer_register_natives: table is null");
    for (size_t i = 0; i < n; ++i) {
      const tracer_native& nt = table[i];
      if (!nt.name || !nt.fn) return fail(S, TRACER_ERROR_ARGUMENT, "native " + std::to_string(i) + ": name and fn must be given");
      std::string name = nt.name;
      if (!is_identifier(name)) return fail(S, TRACER_ERROR_ARGUMENT, "native '" + name + "': a name must be an identifier");
    }
    for (size_t i = 0; i < n; ++i) {
      const tracer_native nt = table[i];
      auto def = std::make_shared<interp::NativeDef>();
      def->name = nt.name;
      def->signature = nt.signature ? nt.signature : "";
      def->doc = nt.doc ? nt.doc : "";
      std::string name = def->name;
      def->fn = [S, nt, name](interp::Interpreter& in, interp::CallArgs& args, tracer::SourceLoc loc) -> Value {
        if (!args.kw.empty()) in.fail(loc, name + "() takes no keyword arguments");
        std::vector<tracer_value> cargs;
        for (const Value& v : args.pos) {
          switch (v.type()) {
            case VT::None: cargs.push_back(tracer_value{TRACER_NONE, {0}}); break;
            case VT::Bool: cargs.push_back(tracer_value_bool(v.as_bool())); break;
            case VT::Int: cargs.push_back(tracer_value_int(v.as_int())); break;
            case VT::Float: cargs.push_back(tracer_value_float(v.as_float())); break;
            case VT::Tensor: cargs.push_back(tracer_value_tensor(new_handle(S, v.as<interp::TensorObj>()->t))); break;
            case VT::Proxy:
              tracer_values_release(cargs.data(), cargs.size());
              in.fail(loc, name + "() is a native function: it runs on tensors and cannot be traced");
            default:
              tracer_values_release(cargs.data(), cargs.size());
              in.fail(loc, name + "() takes tensors, numbers, bools and None, not a " + interp::type_name(v.type()));
          }
        }
        tracer_value result{TRACER_NONE, {0}};
        S->native_error.clear();
        tracer_status st = nt.fn(S, nt.user, cargs.data(), cargs.size(), &result);
        // The result first: a native may hand back one of its arguments without retaining it.
        Value out = st != TRACER_OK || (result.kind == TRACER_TENSOR && !result.as.tensor) ? Value() : to_script(result);
        tracer_values_release(cargs.data(), cargs.size());
        tracer_values_release(&result, 1);  // the reference the native handed over
        if (st != TRACER_OK) {
          std::string msg = S->native_error.empty() ? std::string("failed: ") + tracer_status_name(st) : S->native_error;
          in.fail(loc, name + "(): " + msg);
        }
        return out;
      };
      S->impl->in->register_native(std::move(def));
    }
    return TRACER_OK;
  });
}

tracer_status tracer_register_ops(tracer_state* S, const tracer_op* table, size_t n) {
  return guarded(S, [&] {
    if (n && !table) return fail(S, TRACER_ERROR_ARGUMENT, "tracer_register_ops: table is null");
    for (size_t i = 0; i < n; ++i) {
      const tracer_op& o = table[i];
      if (!o.name || !o.type || !o.kernel)
        return fail(S, TRACER_ERROR_ARGUMENT, "op " + std::to_string(i) + ": name, type and kernel must be given");
      std::string name = o.name;
      if (!is_identifier(name)) return fail(S, TRACER_ERROR_ARGUMENT, "op '" + name + "': a name must be an identifier");
      if (ir::find_op(name))  // every check by op name in the executors and passes means a prim
        return fail(S, TRACER_ERROR_ARGUMENT, "op '" + name + "': prims." + name + " exists; choose another name");
      if (o.num_inputs < 0 || o.num_inputs > 64)
        return fail(S, TRACER_ERROR_ARGUMENT, "op '" + name + "': num_inputs must be between 0 and 64");
    }
    for (size_t i = 0; i < n; ++i) {
      const tracer_op o = table[i];
      ir::OpDecl d;
      d.name = o.name;
      d.ns = "native";
      d.kind = ir::OpKind::Other;
      d.doc = o.doc ? o.doc : "";
      d.signature = o.signature ? o.signature : "";
      for (int k = 0; k < o.num_inputs; ++k) {
        ir::ParamSpec p;
        p.name = "x" + std::to_string(k);
        d.params.push_back(std::move(p));
      }
      std::string qual = "native." + d.name;
      // The C type of an argument (a proxy while tracing, a tensor when run).
      auto type_of = [qual](const ir::Arg& a, size_t k) {
        tracer_type t{};
        rt::DType dt;
        rt::Shape sh;
        if (a.kind == ir::Arg::Kind::Proxy) {
          dt = a.proxy->type.dtype;
          sh = a.proxy->type.shape;
        } else if (a.kind == ir::Arg::Kind::Tensor) {
          dt = a.tensor.dtype();
          sh = a.tensor.shape();
        } else {
          throw ir::OpError("argument " + std::to_string(k + 1) + " is not a tensor");
        }
        if (sh.size() > TRACER_MAX_NDIM) throw ir::OpError("argument " + std::to_string(k + 1) + " has more than 16 dimensions");
        t.dtype = dtype_to_c(dt);
        t.ndim = static_cast<int>(sh.size());
        for (size_t j = 0; j < sh.size(); ++j) t.shape[j] = sh[j];
        return t;
      };
      auto output_type = [S, o, type_of](const std::vector<ir::Arg>& args) {
        std::vector<tracer_type> in;
        for (size_t k = 0; k < args.size(); ++k) in.push_back(type_of(args[k], k));
        tracer_type out{};
        S->native_error.clear();
        tracer_status st = o.type(S, o.user, in.data(), in.size(), &out);
        if (st != TRACER_OK) throw ir::OpError(S->native_error.empty() ? std::string(tracer_status_name(st)) : S->native_error);
        rt::DType dt;
        if (!dtype_from_c(out.dtype, &dt)) throw ir::OpError("the type function gave an unknown dtype");
        if (out.ndim < 0 || out.ndim > TRACER_MAX_NDIM) throw ir::OpError("the type function gave ndim " + std::to_string(out.ndim));
        rt::Shape sh(out.shape, out.shape + out.ndim);
        for (int64_t x : sh)
          if (x < 0) throw ir::OpError("the type function gave a negative size");
        return std::make_pair(ir::TensorType{dt, sh, "cpu"}, out);
      };
      d.meta = [output_type](const std::vector<ir::Arg>& args) { return std::vector<ir::TensorType>{output_type(args).first}; };
      d.cpu = [S, o, output_type](const std::vector<ir::Arg>& args, ir::ExecContext& ctx) {
        auto [type, ctype] = output_type(args);
        rt::Tensor out = rt::Tensor::empty(type.dtype, type.shape, ctx.allocator);
        std::vector<tracer_tensor*> in;
        for (const auto& a : args) in.push_back(new_handle(S, a.tensor));
        S->native_error.clear();
        tracer_status st = o.kernel(S, o.user, in.data(), in.size(), out.data(), &ctype);
        for (tracer_tensor* h : in) tracer_tensor_release(h);
        if (st != TRACER_OK) throw ir::OpError(S->native_error.empty() ? std::string(tracer_status_name(st)) : S->native_error);
        return std::vector<rt::Tensor>{std::move(out)};
      };
      S->impl->in->register_op(std::move(d));
    }
    return TRACER_OK;
  });
}

const char* tracer_help(tracer_state* S, const char* name) {
  if (!S || !name) return nullptr;
  try {
    auto h = S->session->help(name);
    if (!h) return nullptr;
    S->help_text = *h;
    return S->help_text.c_str();
  } catch (...) {
    return nullptr;
  }
}

void tracer_interrupt(tracer_state* S) {
  if (S && S->session) S->session->interrupt();
}

tracer_status tracer_native_error(tracer_state* S, const char* message) {
  if (!S) return TRACER_ERROR_ARGUMENT;
  try {
    S->native_error = message ? message : "";
  } catch (...) {
    S->native_error.clear();  // out of memory for the message: the status still says it failed
  }
  return TRACER_ERROR_SCRIPT;
}

}  // extern "C"
