/* tracer's C API: embed the interpreter of Thunder-style traces in a host application.
 *
 * One state (tracer_state) holds everything: the loaded module, the passes and device chosen,
 * the diagnostics, the registered natives. There are no globals, so several states may live in
 * one process, each used by one thread at a time (docs/embedding.md, "Threads").
 *
 * Every function that can fail returns a tracer_status. On failure the state keeps a message
 * (tracer_last_error) and, for errors in scripts, diagnostics with file, line and column. No C++
 * exception and no abort crosses this boundary; a null handle gives TRACER_ERROR_ARGUMENT.
 *
 * Handles are reference counted: each function that hands one out gives the caller one
 * reference, which tracer_*_release drops. A handle may outlive tracer_close (it keeps what it
 * needs alive); the allocation callbacks may then still be called, until the last tensor of the
 * state is freed. */
#ifndef TRACER_TRACER_H
#define TRACER_TRACER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TRACER_EXPORT __attribute__((visibility("default")))
#else
#define TRACER_EXPORT
#endif

/* The API version the host was compiled against: major * 10000 + minor * 100 + patch. A state
 * opens only when the library's major version equals the host's and its minor is at least the
 * host's (tracer_open checks; TRACER_ERROR_VERSION otherwise). */
#define TRACER_VERSION_MAJOR 0
#define TRACER_VERSION_MINOR 2
#define TRACER_VERSION_PATCH 0
#define TRACER_API_VERSION (TRACER_VERSION_MAJOR * 10000 + TRACER_VERSION_MINOR * 100 + TRACER_VERSION_PATCH)

/* The library's own version (it may be newer than the header the host was built with). */
TRACER_EXPORT int tracer_version(void);

typedef enum tracer_status {
  TRACER_OK = 0,
  TRACER_ERROR_ARGUMENT,   /* a null handle or pointer, a bad dtype, shape, name or count */
  TRACER_ERROR_VERSION,    /* the host's API version does not match the library's */
  TRACER_ERROR_NOT_FOUND,  /* a file, function or name that does not exist */
  TRACER_ERROR_SCRIPT,     /* a syntax, name or runtime error in a script (see the diagnostics) */
  TRACER_ERROR_TYPE,       /* a value of the wrong kind, dtype or shape */
  TRACER_ERROR_MEMORY,     /* an allocation failed (host memory, the allocation callback, or the device) */
  TRACER_ERROR_DEVICE,     /* no GPU, a driver too old, a CUDA or cuBLASLt failure */
  TRACER_ERROR_UNSUPPORTED,/* well-formed but not supported here (a DLPack tensor on another device...) */
  TRACER_ERROR_INTERNAL,   /* a bug in tracer: please report it with the message */
  TRACER_ERROR_JOB,        /* a distributed job's rendezvous failed: a rank missing, a bad RANK... */
  TRACER_STATUS_MAX_ENUM = 0x7fffffff /* (makes the type as wide as an int: any value may be passed) */
} tracer_status;

/* "ok", "argument error", ... (static strings). */
TRACER_EXPORT const char* tracer_status_name(tracer_status s);

typedef struct tracer_state tracer_state;
typedef struct tracer_function tracer_function;
typedef struct tracer_tensor tracer_tensor;

/* ---- diagnostics ---- */

typedef enum tracer_severity {
  TRACER_SEVERITY_ERROR = 0, TRACER_SEVERITY_WARNING, TRACER_SEVERITY_NOTE,
  TRACER_SEVERITY_MAX_ENUM = 0x7fffffff
} tracer_severity;

/* One diagnostic. The strings belong to the state and stay valid until the diagnostics are
 * cleared (tracer_clear_diagnostics) or the state is closed. file is "" and line and column are
 * 0 when the diagnostic has no place (a device error, say). rendered is the clang-style text:
 * "file:line:col: error: message", the source line and a caret, and its notes. */
typedef struct tracer_diagnostic {
  tracer_severity severity;
  const char* file;
  int line, column;
  const char* message;
  const char* rendered;
} tracer_diagnostic;

/* ---- opening a state ---- */

typedef struct tracer_config {
  int api_version; /* set by tracer_config_init to TRACER_API_VERSION: leave it */
  uint64_t seed;   /* random inputs and the stateful random generator; default 0 */
  int64_t step_limit; /* statements and calls a script may run per call; 0: unlimited */
  /* Where print() in scripts writes; default: stdout. text is not NUL-terminated. */
  void (*output)(void* user, const char* text, size_t len);
  /* Called for each diagnostic as it is recorded (they are also kept: tracer_diagnostic_get). */
  void (*diagnostic)(void* user, const tracer_diagnostic* d);
  /* Tensor storage (the interpreter's memory for tensor data, its bulk): alloc returns memory of
   * `size` bytes aligned to `align` (a power of two, at most 64), or null when it cannot; free
   * gets back the pointer and the same size. Both or neither; default: the C library. The
   * interpreter's own small objects (syntax trees, traces, strings) use operator new. */
  void* (*alloc)(void* user, size_t size, size_t align);
  void (*free)(void* user, void* ptr, size_t size);
  void* user; /* passed to the callbacks above */
  /* Since 0.2. The most bytes tensor storage may hold, also the most one list or string of a
   * script may take: past it an allocation is a located error (TRACER_ERROR_MEMORY or a script
   * error), never the machine's memory. 0: $TRACER_MEMORY_LIMIT (e.g. "512M"), else 90% of
   * the machine's memory. A host built against 0.1's header, whose config ends at user, gets
   * the default. */
  uint64_t memory_limit;
} tracer_config;

/* Defaults, and the api_version of this header. */
TRACER_EXPORT void tracer_config_init(tracer_config* cfg);

/* Opens a state. cfg may be null (defaults). On TRACER_ERROR_VERSION or TRACER_ERROR_MEMORY *out
 * stays null. */
TRACER_EXPORT tracer_status tracer_open(const tracer_config* cfg, tracer_state** out);
/* Closes a state: the host's reference to it goes. Its memory is freed then, or when the last
 * tensor or function handle of it is released (each keeps the whole state alive). Null is
 * allowed. */
TRACER_EXPORT void tracer_close(tracer_state* S);

/* The message of the last failed call on S ("" after a success). Valid until the next call. */
TRACER_EXPORT const char* tracer_last_error(const tracer_state* S);

TRACER_EXPORT size_t tracer_diagnostic_count(const tracer_state* S);
/* Diagnostic i (0-based) of those recorded since the last clear. */
TRACER_EXPORT tracer_status tracer_diagnostic_get(const tracer_state* S, size_t i, tracer_diagnostic* out);
/* All diagnostics as one text, as the `tracer` program prints them ("" when none). */
TRACER_EXPORT const char* tracer_diagnostics_rendered(tracer_state* S);
TRACER_EXPORT void tracer_clear_diagnostics(tracer_state* S);

/* ---- modules and functions ---- */

/* Overrides a module-level assignment before loading ("T", "64"): values parse as int, float,
 * True/False, else string. */
TRACER_EXPORT tracer_status tracer_set_global(tracer_state* S, const char* name, const char* value);
/* Reads, parses and runs a module's top level (its definitions). The state holds one module:
 * loading another replaces it (functions already looked up keep the one they came from); one
 * that fails to load leaves the previous module in place. */
TRACER_EXPORT tracer_status tracer_load_file(tracer_state* S, const char* path);
/* name is the module's file name in diagnostics. */
TRACER_EXPORT tracer_status tracer_load_string(tracer_state* S, const char* name, const char* text);

/* Looks up a top-level function of the loaded module once, to call it many times. */
TRACER_EXPORT tracer_status tracer_function_get(tracer_state* S, const char* name, tracer_function** out);
TRACER_EXPORT void tracer_function_release(tracer_function* f);

/* ---- tensors ---- */

typedef enum tracer_dtype {
  TRACER_F32 = 0, TRACER_F64, TRACER_F16, TRACER_BF16,
  TRACER_I8, TRACER_U8, TRACER_I32, TRACER_I64, TRACER_BOOL,
  TRACER_DTYPE_MAX_ENUM = 0x7fffffff /* (any int may be passed: others are refused, not undefined) */
} tracer_dtype;

/* "f32", "bf16", ... ; bytes per element. */
TRACER_EXPORT const char* tracer_dtype_name(tracer_dtype dt);
TRACER_EXPORT size_t tracer_dtype_size(tracer_dtype dt);

/* A new tensor (dense, row-major, on the CPU) holding a copy of data (numel * dtype size bytes;
 * null: zeros). ndim may be 0 (a scalar tensor); shape entries must be >= 0. */
TRACER_EXPORT tracer_status tracer_tensor_new(tracer_state* S, tracer_dtype dt, int ndim, const int64_t* shape,
                                              const void* data, tracer_tensor** out);
/* A tensor over the host's memory, without a copy: data must stay valid and unchanged-by-others
 * until release(ctx) is called (when tracer drops its last reference; release may be null).
 * data must be aligned to its element size. tracer never writes into borrowed memory. If the
 * call fails, release is not called: the memory stays the host's. */
TRACER_EXPORT tracer_status tracer_tensor_borrow(tracer_state* S, tracer_dtype dt, int ndim, const int64_t* shape,
                                                 void* data, void (*release)(void* ctx), void* ctx,
                                                 tracer_tensor** out);
TRACER_EXPORT void tracer_tensor_retain(tracer_tensor* t);
TRACER_EXPORT void tracer_tensor_release(tracer_tensor* t);
TRACER_EXPORT tracer_dtype tracer_tensor_dtype(const tracer_tensor* t);
TRACER_EXPORT int tracer_tensor_ndim(const tracer_tensor* t);
/* The shape (ndim entries), valid while t lives. */
TRACER_EXPORT const int64_t* tracer_tensor_shape(const tracer_tensor* t);
TRACER_EXPORT int64_t tracer_tensor_numel(const tracer_tensor* t);
TRACER_EXPORT size_t tracer_tensor_nbytes(const tracer_tensor* t);
/* The elements, row-major, to read: results may share storage with other tensors. */
TRACER_EXPORT const void* tracer_tensor_data(const tracer_tensor* t);
/* The elements to write, when nothing else can see them: t is the only reference to its
 * storage (a tensor from tracer_tensor_new not yet shared, say); else null. Borrowed memory is
 * the host's own: write it there. */
TRACER_EXPORT void* tracer_tensor_mutable_data(tracer_tensor* t);

/* DLPack (dlpack/dlpack.h, v0.6 and later). from_dlpack takes ownership of m (its deleter runs
 * once, when tracer is done with it, or when the call fails) and copies nothing: the tensor must
 * be on the CPU (kDLCPU), of a dtype above, compact row-major (strides null or the row-major
 * ones) and aligned to its element size. to_dlpack gives a DLManagedTensor that holds a
 * reference to t; the consumer calls its deleter and must treat the data as read-only (it may
 * be shared with other tensors; DLPack 0.6 has no read-only flag). */
struct DLManagedTensor;
TRACER_EXPORT tracer_status tracer_tensor_from_dlpack(tracer_state* S, struct DLManagedTensor* m, tracer_tensor** out);
TRACER_EXPORT tracer_status tracer_tensor_to_dlpack(tracer_tensor* t, struct DLManagedTensor** out);

/* ---- values and calls ---- */

typedef enum tracer_kind {
  TRACER_NONE = 0, TRACER_BOOLEAN, TRACER_INT, TRACER_FLOAT, TRACER_TENSOR,
  TRACER_KIND_MAX_ENUM = 0x7fffffff
} tracer_kind;

/* An argument or result. In results, a tensor is a new reference the caller releases
 * (tracer_values_release releases a whole array). */
typedef struct tracer_value {
  tracer_kind kind;
  union {
    int boolean;
    int64_t i;
    double f;
    tracer_tensor* tensor;
  } as;
} tracer_value;

TRACER_EXPORT tracer_value tracer_value_tensor(tracer_tensor* t);
TRACER_EXPORT tracer_value tracer_value_int(int64_t i);
TRACER_EXPORT tracer_value tracer_value_float(double f);
TRACER_EXPORT tracer_value tracer_value_bool(int b);
/* Releases the tensors among values[0..n) and sets every entry to none. */
TRACER_EXPORT void tracer_values_release(tracer_value* values, size_t n);

/* Passes applied when calling (comma-separated names: "grad,philox,remat,fuse,del_last_used";
 * "" for none, the default), and the device ("cpu", the default, "cuda" or "cuda:N"). A GPU
 * that cannot be opened is an error here. */
TRACER_EXPORT tracer_status tracer_set_passes(tracer_state* S, const char* passes);
TRACER_EXPORT tracer_status tracer_set_device(tracer_state* S, const char* device);

/* A rank of a distributed job (docs/distributed.md): joins the job torchrun's variables describe
 * (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT...; `tracer launch` sets them). Rank 0 serves the
 * job's store; every rank waits for the others up to TRACER_DIST_TIMEOUT seconds (300). Without
 * RANK and WORLD_SIZE it does nothing and returns TRACER_OK with *rank 0 and *world_size 1
 * (either pointer may be null). TRACER_ERROR_JOB names the bad variable or the missing ranks.
 * tracer_leave_job: the ranks meet again, so that rank 0 stops serving only when no rank needs
 * the store; a state closed without it leaves at once (the others then report it). */
TRACER_EXPORT tracer_status tracer_join_job(tracer_state* S, int* rank, int* world_size);
TRACER_EXPORT tracer_status tracer_leave_job(tracer_state* S);

/* Calls f. Its results, flattened (nested tuples and lists in order), go to results[0..*n);
 * when more than `capacity` come back, the call fails with TRACER_ERROR_ARGUMENT, *n says how
 * many there would be, and nothing is kept.
 *
 * With no passes on the CPU, f runs eagerly, as a script would call it: arguments may be
 * tensors, numbers and bools. Otherwise f is traced for the tensors' dtypes and shapes (every
 * argument must be a tensor), transformed by the passes and run on the device; the program is
 * kept, so a later call with the same dtypes and shapes (and passes and device) runs it again
 * without tracing. After grad the results are the loss, then one entry per input in the
 * inputs' order: its gradient, or TRACER_NONE for an input without one (integers, an input the
 * loss does not depend on), so results can be indexed by position. */
TRACER_EXPORT tracer_status tracer_call(tracer_state* S, tracer_function* f, const tracer_value* args, size_t nargs,
                                        tracer_value* results, size_t capacity, size_t* n);

/* ---- natives: C functions that scripts call ---- */

/* A native function: gets its arguments (tensors borrowed for the call) and writes one result
 * (a tensor result is a reference the native hands over: from tracer_tensor_new, or one it
 * retained). On failure it returns a status other than TRACER_OK after tracer_native_error;
 * the script then fails at the call, with that message. */
typedef tracer_status (*tracer_native_fn)(tracer_state* S, void* user, const tracer_value* args, size_t nargs,
                                          tracer_value* result);

typedef struct tracer_native {
  const char* name;      /* the name scripts call it by (an identifier) */
  const char* signature; /* as documentation: "scale(x: tensor, k: float) -> tensor" */
  const char* doc;       /* one or more lines, shown by the REPL's :help */
  tracer_native_fn fn;
  void* user;            /* passed to fn */
} tracer_native;

/* The documentation of a name, as the REPL's :help shows it: a function of the module, a builtin,
 * a native (its signature and doc), a prims op, a native op, an ltorch function or a pass. Null
 * when nothing has that name. Valid until the next call on S. */
TRACER_EXPORT const char* tracer_help(tracer_state* S, const char* name);

/* Registers n natives (copied: the table may be freed afterwards). They are visible to modules
 * loaded afterwards, as builtins are. A name already registered is replaced. */
TRACER_EXPORT tracer_status tracer_register_natives(tracer_state* S, const tracer_native* table, size_t n);
/* ---- native ops: primitives of the host's, usable inside traces ---- */

#define TRACER_MAX_NDIM 16

/* A tensor's type: dtype and shape (ndim entries of shape are used). */
typedef struct tracer_type {
  tracer_dtype dtype;
  int ndim;
  int64_t shape[TRACER_MAX_NDIM];
} tracer_type;

/* The output type from the inputs' (n == the op's num_inputs). On a failure (inputs the op does
 * not take) return tracer_native_error(S, why). */
typedef tracer_status (*tracer_op_type_fn)(tracer_state* S, void* user, const tracer_type* inputs, size_t n,
                                           tracer_type* output);
/* Computes the output: `output` is allocated by tracer (row-major, of output_type) and the
 * inputs are read-only. */
typedef tracer_status (*tracer_op_kernel_fn)(tracer_state* S, void* user, const tracer_tensor* const* inputs, size_t n,
                                             void* output, const tracer_type* output_type);

typedef struct tracer_op {
  const char* name;      /* scripts call native.NAME(...); traces record it as such */
  const char* signature; /* documentation: "native.clip(x: tensor) -> tensor" */
  const char* doc;
  int num_inputs;        /* tensor inputs, 0 to 64 */
  tracer_op_type_fn type;
  tracer_op_kernel_fn kernel;
  void* user;
} tracer_op;

/* Registers n ops (the table is copied). A name may not be a prims op's. A native op is a primitive: called on tensors it runs
 * its kernel at once; called while tracing it records a statement `t = native.NAME(x)` whose
 * type the type function gives, which the CPU executor runs with the kernel (on a GPU device,
 * on the CPU between device copies). Passes see it as a primitive of unknown semantics: fuse
 * leaves it alone, grad refuses it (no gradient rule). */
TRACER_EXPORT tracer_status tracer_register_ops(tracer_state* S, const tracer_op* table, size_t n);

/* Makes the script running in S fail with "interrupted" at its next step: from a signal handler
 * (it only sets a flag) or another thread. Scripts, tracing and passes check it; the execution
 * of a traced program runs to its end. The interrupted call returns TRACER_ERROR_SCRIPT; an
 * interrupt with nothing running is dropped at the next call. */
TRACER_EXPORT void tracer_interrupt(tracer_state* S);

/* Inside a native: the message its failure reports. Returns TRACER_ERROR_SCRIPT. */
TRACER_EXPORT tracer_status tracer_native_error(tracer_state* S, const char* message);

#ifdef __cplusplus
}
#endif

#endif /* TRACER_TRACER_H */
