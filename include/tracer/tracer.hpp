// tracer's C++ embedding API: a thin RAII layer over the C API (tracer.h). Handles release
// themselves, and failures throw tracer::Error, which carries the status and the diagnostics
// the failing call recorded. Header only; it calls nothing but the C API.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tracer/tracer.h"

namespace tracer {
// An inline namespace: the names are tracer::State, tracer::Tensor..., mangled apart from the
// library's internal ones (which live in namespace tracer too), so a host that links tracer's
// static library cannot collide with them, and a later incompatible layer can get v1.
inline namespace embed_v0 {

struct Diagnostic {
  tracer_severity severity = TRACER_SEVERITY_ERROR;
  std::string file;
  int line = 0, column = 0;
  std::string message;
  std::string rendered;  // "file:line:col: error: ...", the source line, a caret, the notes
};

class Error : public std::runtime_error {
 public:
  Error(tracer_status status, const std::string& message, std::vector<Diagnostic> diagnostics = {})
      : std::runtime_error(message), status_(status), diagnostics_(std::move(diagnostics)) {}
  tracer_status status() const { return status_; }
  const std::vector<Diagnostic>& diagnostics() const { return diagnostics_; }

 private:
  tracer_status status_;
  std::vector<Diagnostic> diagnostics_;
};

// A reference to a tensor (copying the object adds a reference).
class Tensor {
 public:
  Tensor() = default;
  // Takes over one reference the caller holds.
  static Tensor adopt(tracer_tensor* h) {
    Tensor t;
    t.h_ = h;
    return t;
  }
  Tensor(const Tensor& o) : h_(o.h_) { tracer_tensor_retain(h_); }
  Tensor(Tensor&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  Tensor& operator=(Tensor o) noexcept {
    std::swap(h_, o.h_);
    return *this;
  }
  ~Tensor() { tracer_tensor_release(h_); }

  explicit operator bool() const { return h_ != nullptr; }
  tracer_tensor* handle() const { return h_; }
  tracer_dtype dtype() const { return tracer_tensor_dtype(h_); }
  std::vector<int64_t> shape() const {
    const int64_t* s = tracer_tensor_shape(h_);
    return s ? std::vector<int64_t>(s, s + tracer_tensor_ndim(h_)) : std::vector<int64_t>{};
  }
  int64_t numel() const { return tracer_tensor_numel(h_); }
  size_t nbytes() const { return tracer_tensor_nbytes(h_); }
  const void* data() const { return tracer_tensor_data(h_); }
  // Writable elements when this is the only reference to them (see tracer_tensor_mutable_data).
  void* mutable_data() { return tracer_tensor_mutable_data(h_); }
  // The elements as T (the caller picks the T that matches dtype()).
  template <class T> const T* data_as() const { return static_cast<const T*>(data()); }

 private:
  tracer_tensor* h_ = nullptr;
};

// An argument or result: none, a bool, an integer, a float or a tensor.
class Value {
 public:
  Value() = default;
  Value(Tensor t) : kind_(TRACER_TENSOR), tensor_(std::move(t)) {}
  Value(bool b) : kind_(TRACER_BOOLEAN), i_(b) {}
  Value(int i) : kind_(TRACER_INT), i_(i) {}
  Value(int64_t i) : kind_(TRACER_INT), i_(i) {}
  Value(double f) : kind_(TRACER_FLOAT), f_(f) {}
  tracer_kind kind() const { return kind_; }
  bool is_tensor() const { return kind_ == TRACER_TENSOR; }
  const Tensor& tensor() const {
    if (kind_ != TRACER_TENSOR) throw Error(TRACER_ERROR_TYPE, "the value is not a tensor");
    return tensor_;
  }
  int64_t as_int() const { return kind_ == TRACER_FLOAT ? static_cast<int64_t>(f_) : i_; }
  double as_double() const { return kind_ == TRACER_FLOAT ? f_ : static_cast<double>(i_); }
  bool as_bool() const { return kind_ == TRACER_FLOAT ? f_ != 0 : i_ != 0; }

  // The C form, borrowing the tensor (valid while this Value lives).
  tracer_value c() const {
    switch (kind_) {
      case TRACER_TENSOR: return tracer_value_tensor(tensor_.handle());
      case TRACER_BOOLEAN: return tracer_value_bool(i_ != 0);
      case TRACER_INT: return tracer_value_int(i_);
      case TRACER_FLOAT: return tracer_value_float(f_);
      default: {
        tracer_value v{};
        v.kind = TRACER_NONE;
        return v;
      }
    }
  }
  // Takes over a C value (its tensor reference, if any).
  static Value adopt(const tracer_value& v) {
    switch (v.kind) {
      case TRACER_TENSOR: return Value(Tensor::adopt(v.as.tensor));
      case TRACER_BOOLEAN: return Value(v.as.boolean != 0);
      case TRACER_INT: return Value(v.as.i);
      case TRACER_FLOAT: return Value(v.as.f);
      default: return Value();
    }
  }

 private:
  tracer_kind kind_ = TRACER_NONE;
  Tensor tensor_;
  int64_t i_ = 0;
  double f_ = 0;
};

class Function {
 public:
  Function() = default;
  static Function adopt(tracer_function* h) {
    Function f;
    f.h_ = h;
    return f;
  }
  Function(const Function&) = delete;
  Function& operator=(const Function&) = delete;
  Function(Function&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  Function& operator=(Function&& o) noexcept {
    std::swap(h_, o.h_);
    return *this;
  }
  ~Function() { tracer_function_release(h_); }
  tracer_function* handle() const { return h_; }

 private:
  tracer_function* h_ = nullptr;
};

// One interpreter state. Not copyable; one thread at a time (several states may run in parallel).
class State {
 public:
  State() : State(nullptr) {}
  explicit State(const tracer_config* cfg) {
    tracer_status st = tracer_open(cfg, &S_);
    if (st != TRACER_OK) throw Error(st, std::string("tracer_open: ") + tracer_status_name(st));
  }
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  State(State&& o) noexcept : S_(std::exchange(o.S_, nullptr)) {}
  State& operator=(State&& o) noexcept {
    std::swap(S_, o.S_);
    return *this;
  }
  ~State() { tracer_close(S_); }
  tracer_state* handle() const { return S_; }

  void set_global(const std::string& name, const std::string& value) {
    check(tracer_set_global(S_, name.c_str(), value.c_str()));
  }
  void load_file(const std::string& path) { check(tracer_load_file(S_, path.c_str())); }
  void load_string(const std::string& name, const std::string& text) {
    check(tracer_load_string(S_, name.c_str(), text.c_str()));
  }
  Function function(const std::string& name) {
    tracer_function* f = nullptr;
    check(tracer_function_get(S_, name.c_str(), &f));
    return Function::adopt(f);
  }
  void set_passes(const std::string& passes) { check(tracer_set_passes(S_, passes.c_str())); }
  void set_device(const std::string& device) { check(tracer_set_device(S_, device.c_str())); }
  void register_natives(const std::vector<tracer_native>& table) {
    check(tracer_register_natives(S_, table.data(), table.size()));
  }

  // A tensor holding a copy of data (null: zeros).
  Tensor tensor(tracer_dtype dt, const std::vector<int64_t>& shape, const void* data = nullptr) {
    tracer_tensor* t = nullptr;
    check(tracer_tensor_new(S_, dt, static_cast<int>(shape.size()), shape.data(), data, &t));
    return Tensor::adopt(t);
  }
  // A tensor over the caller's memory, without a copy (see tracer_tensor_borrow).
  Tensor borrow(tracer_dtype dt, const std::vector<int64_t>& shape, void* data, void (*release)(void*) = nullptr,
                void* ctx = nullptr) {
    tracer_tensor* t = nullptr;
    check(tracer_tensor_borrow(S_, dt, static_cast<int>(shape.size()), shape.data(), data, release, ctx, &t));
    return Tensor::adopt(t);
  }

  // Calls f; the results flattened (see tracer_call). At most max_results come back (a call
  // with more fails, and is not run again).
  std::vector<Value> call(const Function& f, const std::vector<Value>& args, size_t max_results = 4096) {
    std::vector<tracer_value> in;
    in.reserve(args.size());
    for (const Value& a : args) in.push_back(a.c());
    std::vector<tracer_value> out(max_results);
    size_t n = 0;
    check(tracer_call(S_, f.handle(), in.data(), in.size(), out.data(), out.size(), &n));
    std::vector<Value> res;
    res.reserve(n);
    for (size_t i = 0; i < n; ++i) res.push_back(Value::adopt(out[i]));
    return res;
  }

  std::vector<Diagnostic> diagnostics() const { return diagnostics_from(0); }
  std::string rendered_diagnostics() { return tracer_diagnostics_rendered(S_); }
  void clear_diagnostics() {
    tracer_clear_diagnostics(S_);
    seen_ = 0;
  }

 private:
  tracer_state* S_ = nullptr;
  size_t seen_ = 0;  // diagnostics already attached to an Error

  std::vector<Diagnostic> diagnostics_from(size_t from) const {
    std::vector<Diagnostic> ds;
    size_t count = tracer_diagnostic_count(S_);
    for (size_t i = from; i < count; ++i) {
      tracer_diagnostic d;
      if (tracer_diagnostic_get(S_, i, &d) != TRACER_OK) continue;
      ds.push_back(Diagnostic{d.severity, d.file, d.line, d.column, d.message, d.rendered});
    }
    return ds;
  }
  void check(tracer_status st) {
    if (st == TRACER_OK) return;
    size_t count = tracer_diagnostic_count(S_);
    if (seen_ > count) seen_ = 0;
    std::vector<Diagnostic> ds = diagnostics_from(seen_);
    seen_ = count;
    throw Error(st, tracer_last_error(S_), std::move(ds));
  }
};

}  // namespace embed_v0
}  // namespace tracer
