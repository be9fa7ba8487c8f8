// The C API's handles and the helpers its files share (api/c_api.cpp: states, modules, calls;
// c_api_tensors.cpp: tensors and DLPack; c_api_natives.cpp: natives and native ops). Internal.
#pragma once
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

namespace tracer::capi {

void state_ref(tracer_state* S);
void state_unref(tracer_state* S);
// Records msg as S's last error; returns st.
tracer_status fail(tracer_state* S, tracer_status st, const std::string& msg);
// Hands the diagnostics recorded since the last call to the host's callback.
void forward_diagnostics(tracer_state* S);
// The first error diagnostic added since `from` (its message), for tracer_last_error.
std::string first_error_since(tracer_state* S, size_t from, const std::string& fallback);

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

bool dtype_from_c(int dt, rt::DType* out);
tracer_dtype dtype_to_c(rt::DType d);
bool shape_from_c(int ndim, const int64_t* shape, rt::Shape* out, std::string* why);
// The checks tensor_new and tensor_borrow share: out given (and cleared), dtype and shape valid.
tracer_status tensor_type(tracer_state* S, const char* fn, int dt, int ndim, const int64_t* shape, tracer_tensor** out,
                          rt::DType* d, rt::Shape* sh);
bool is_identifier(const std::string& name);
// A new handle (one reference, which also holds the state) over t.
tracer_tensor* new_handle(tracer_state* S, rt::Tensor t);
// A C value as a script value (a tensor shares the handle's storage).
Value to_script(const tracer_value& v);

}  // namespace tracer::capi
