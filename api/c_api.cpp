// The C API (include/tracer/tracer.h) over the session's state: states, diagnostics, modules,
// values and calls. Tensors and DLPack: c_api_tensors.cpp; natives and native ops:
// c_api_natives.cpp. Every entry point catches everything: a C++ exception becomes a status and
// a message, never an unwind into C.
#include "api/c_api_impl.h"

namespace tracer::capi {

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

Value to_script(const tracer_value& v) {
  switch (v.kind) {
    case TRACER_BOOLEAN: return Value::boolean(v.as.boolean != 0);
    case TRACER_INT: return Value::integer(v.as.i);
    case TRACER_FLOAT: return Value::number(v.as.f);
    case TRACER_TENSOR: return Value(new interp::TensorObj(v.as.tensor->t));
    default: return Value();
  }
}

}  // namespace tracer::capi

using namespace tracer::capi;

namespace {

// A script value as a result entry (tensors: a new handle); false for kinds the C API has none
// of. Nested tuples and lists are flattened in order.
bool flatten_value(tracer_state* S, const Value& v, std::vector<tracer_value>& out, std::string* why) {
  switch (v.type()) {
    case VT::None: out.push_back(tracer_value{TRACER_NONE, {0}}); return true;
    case VT::Bool: out.push_back(tracer_value_bool(v.as_bool())); return true;
    case VT::Int: out.push_back(tracer_value_int(v.as_int())); return true;
    case VT::Float: out.push_back(tracer_value_float(v.as_float())); return true;
    case VT::Tensor: out.push_back(tracer_value_tensor(new_handle(S, v.as<interp::TensorObj>()->host()))); return true;
    case VT::Tuple:
      for (const Value& x : v.as<interp::TupleObj>()->items)
        if (!flatten_value(S, x, out, why)) return false;
      return true;
    case VT::List:
      for (const Value& x : v.as<interp::ListObj>()->items)
        if (!flatten_value(S, x, out, why)) return false;
      return true;
    case VT::Dict:  // its values in the dict's order (a gradient pytree's)
      for (auto& [k, x] : v.as<interp::DictObj>()->items())
        if (!flatten_value(S, x, out, why)) return false;
      return true;
    default:
      *why = std::string("a result is a ") + interp::type_name(v.type()) +
             ", which the C API cannot return (tensors, numbers, bools and None, in tuples, lists and dicts)";
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
  const interp::Traces& prog = it->second.prog;
  if (prog.size() > 1 && !results.empty()) {
    // After grad: the loss, then one entry per input, in the inputs' order: TRACER_NONE where an
    // input has no gradient (an integer input, one nothing depends on), so hosts can index the
    // results by position.
    std::vector<std::pair<std::string, ir::Arg>> placed{results[0]};
    size_t k = 1;
    for (const auto& g : prog[1]->output.items) {
      if (g.kind == ir::Arg::Kind::Proxy && k < results.size()) placed.push_back(results[k++]);
      else placed.emplace_back("", ir::Arg());
    }
    results = std::move(placed);
  }
  for (const auto& [name, a] : results)
    if (!flatten_arg(S, a, got, &why)) {
      tracer_values_release(got.data(), got.size());
      got.clear();
      return fail(S, TRACER_ERROR_TYPE, why);
    }
  return TRACER_OK;
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
    case TRACER_ERROR_JOB: return "job error";
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
  if (cfg) {
    // A host built against an older minor version passed a shorter config: only its fields.
    if (cfg->api_version / 10000 != TRACER_VERSION_MAJOR || cfg->api_version % 10000 / 100 > TRACER_VERSION_MINOR)
      return TRACER_ERROR_VERSION;
    if (cfg->api_version % 10000 / 100 < 2)
      std::memcpy(&c, cfg, offsetof(tracer_config, memory_limit));
    else
      c = *cfg;
  }
  if ((c.alloc == nullptr) != (c.free == nullptr)) return TRACER_ERROR_ARGUMENT;
  try {
    auto S = std::make_unique<tracer_state>();
    S->cfg = c;
    tracer::SessionOptions o;
    o.seed = c.seed;
    o.step_limit = c.step_limit;
    o.memory_limit = static_cast<size_t>(c.memory_limit);
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
    // A function, or a compiled one (`step = value_and_grad(loss)` at the module's top level).
    if (it == m->globals.end() || !(it->second.is(VT::Function) || it->second.is(VT::Compiled)))
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
    std::vector<std::string> ps = tracer::split_passes(passes ? passes : "");
    size_t before = S->impl->diags.size();
    // A pass that does not exist is not found; an order the passes refuse, an argument error.
    if (!S->session->set_passes(ps)) {
      std::string why = first_error_since(S, before, "unknown pass");
      return fail(S, why.find("pass order: ") != std::string::npos ? TRACER_ERROR_ARGUMENT : TRACER_ERROR_NOT_FOUND, why);
    }
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

tracer_status tracer_join_job(tracer_state* S, int* rank, int* world_size) {
  return guarded(S, [&] {
    size_t before = S->impl->diags.size();
    if (!S->session->join_job()) return fail(S, TRACER_ERROR_JOB, first_error_since(S, before, "could not join the job"));
    auto job = S->session->job();
    if (rank) *rank = job ? job->rank : 0;
    if (world_size) *world_size = job ? job->world_size : 1;
    return TRACER_OK;
  });
}

tracer_status tracer_leave_job(tracer_state* S) {
  return guarded(S, [&] {
    size_t before = S->impl->diags.size();
    if (!S->session->leave_job()) return fail(S, TRACER_ERROR_JOB, first_error_since(S, before, "the job's ranks did not meet at the end"));
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
    // A compiled function (jit, value_and_grad) brings its own passes and device.
    bool eager = (S->passes.empty() && S->device == "cpu") || f->fn.is(VT::Compiled);
    tracer_status st = eager ? call_eager(S, f, args, nargs, got) : call_traced(S, f, args, nargs, got);
    if (st != TRACER_OK) return st;
    return deliver(S, got, results, capacity, n);
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

}  // extern "C"
