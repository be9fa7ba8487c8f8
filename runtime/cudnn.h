// Fused attention through cuDNN's backend graph API, with cuDNN loaded at run time (dlopen) as the
// driver and cuBLASLt are: the same binary runs where cuDNN is absent. Knows nothing of traces:
// an attention problem is four-dimensional views [b, h, s, d] with element strides (the head
// dimension innermost), so q, k and v may be read straight out of a fused qkv buffer and the
// output written in any layout. docs/cudnn.md describes the graphs, versions and fallbacks.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/cuda.h"

namespace tracer::rt::cuda {

struct CudnnApi;  // the entry points (cudnn.cpp)

// One attention: out = softmax(q k^T * scale [causal mask]) v per (batch, head), the log-sum-exp
// of each query row's scaled, masked scores (natural log, f32, packed [b, h, s_q]) beside it.
struct AttentionProblem {
  using Strides = std::array<int64_t, 4>;  // elements, of dims [b, h, s, d]
  DType dtype = DType::bf16;               // bf16 or f16
  int64_t b = 1, h = 1, s_q = 0, s_kv = 0, d = 0, d_v = 0;
  Strides q{}, k{}, v{}, o{};   // o: the forward's output; the backward's saved output
  Strides dout{}, dq{}, dk{}, dv{};  // the backward's
  bool causal = false;  // key j > query i masked (top-left aligned)
  // An additive mask (bias) of the I/O dtype added to the scaled scores: [bias_b, bias_h, s_q,
  // s_kv] with bias_b 1 or b, bias_h 1 or h, at bias_s strides (the key dimension innermost).
  bool bias = false;
  int64_t bias_b = 1, bias_h = 1;
  Strides bias_s{};
  float scale = 1;
  int align = 16;       // the smallest byte alignment of the operands' addresses (16, 8, 4 or 2)
  static Strides packed(int64_t h, int64_t s, int64_t d) { return {h * s * d, s * d, d, 1}; }
  // The same problem with every tensor packed (the layout of a contiguous [b, h, s, d]).
  static AttentionProblem contiguous(DType dt, int64_t b, int64_t h, int64_t s_q, int64_t s_kv, int64_t d, int64_t d_v,
                                     bool causal, float scale);
  std::string key(bool backward) const;  // everything that selects a plan
};

class Cudnn {
 public:
  // Loads cuDNN ($TRACER_CUDNN_LIBRARY, a path or a name, else libcudnn.so.9 from the system's
  // search path) and creates a handle on dev's stream; null with the reason in *why when it
  // cannot (not found, entry points missing, no handle). plan_dir: where plans are kept between
  // runs (empty: not kept).
  static std::unique_ptr<Cudnn> open(Device& dev, const std::string& plan_dir, std::string* why);
  // The operation graph of a problem, built against a recorder instead of cuDNN (no library or
  // device needed): its operations in order as cuDNN's own tags name them
  // ("Matmul_MUL_Reduction_..."), and its non-virtual tensors ("uid 1 type 9 dims ... strides ...").
  // detail (optional): each operation with its operands' uid (v<n> for intermediates, by first
  // appearance), dtype, dims and strides, and a pointwise operation's precision and axis.
  static std::string graph_tag(const AttentionProblem& p, bool backward, std::vector<std::string>* tensors,
                               std::string* detail = nullptr);
  // Loads cuDNN as open() would, without a device: "" and its version and file, or why not.
  static std::string probe(int* version, std::string* library);
  ~Cudnn();
  Cudnn(const Cudnn&) = delete;
  Cudnn& operator=(const Cudnn&) = delete;

  int version() const { return version_; }  // cudnnGetVersion(): 91400 for 9.14.0
  std::string version_string() const;       // "9.14.0"
  const std::string& library() const { return library_; }  // the file loaded

  // Why this version has no engine for the problem without asking it (shapes, dtypes and
  // versions cuDNN's documentation rules out), or "" when it may have one. *by_version: the
  // reason is this version's (a newer cuDNN has an engine), not the problem's.
  std::string unsupported(const AttentionProblem& p, bool backward, int compute_major, bool* by_version = nullptr) const;

  // Builds the problem's plan (once: plans are cached by AttentionProblem::key, in memory and
  // in plan_dir) and returns "" or why cuDNN has none. Thread-compatible: one thread at a time.
  struct Prepared {
    std::string error;  // empty: ready
    bool built = false, loaded = false;  // built now; read from plan_dir now
    double ms = 0;                       // time spent building or loading now
  };
  Prepared prepare(const AttentionProblem& p, bool backward);

  // The device bytes a prepared problem's run needs besides its operands: cuDNN's workspace,
  // and for the backward the f32 row sums (b*h*s_q) and dq accumulator (b*h*s_q*d), which the
  // caller allocates (forward and backward take them as one block: see workspace_layout).
  size_t engine_workspace(const AttentionProblem& p, bool backward) const;
  // A prepared problem's plan as cuDNN describes it (its JSON: the engine and its knobs), or "".
  std::string describe(const AttentionProblem& p, bool backward) const;
  const std::string& load_error() const { return load_error_; }  // why a plan kept on disk was not used

  // Runs a prepared problem on the device's stream (capturable in a CUDA graph). ws: at least
  // engine_workspace bytes (0 when none). The backward's row sums and dq accumulator are
  // separate blocks of b*h*s_q and b*h*s_q*d floats.
  // bias: the problem's bias tensor (p.bias), else unused.
  void forward(const AttentionProblem& p, DevPtr q, DevPtr k, DevPtr v, DevPtr o, DevPtr stats, DevPtr ws, DevPtr bias = 0);
  void backward(const AttentionProblem& p, DevPtr q, DevPtr k, DevPtr v, DevPtr o, DevPtr dout, DevPtr stats, DevPtr dq,
                DevPtr dk, DevPtr dv, DevPtr row_sums, DevPtr dq_accum, DevPtr ws, DevPtr bias = 0);

 private:
  struct Plan;
  Cudnn() = default;
  Plan* find(const AttentionProblem& p, bool backward) const;
  void execute(Plan& plan, const std::vector<std::pair<int64_t, DevPtr>>& tensors, DevPtr ws);
  Device* dev_ = nullptr;
  std::shared_ptr<CudnnApi> api_;
  void* handle_ = nullptr;
  int version_ = 0;
  std::string library_, plan_dir_;
  std::unordered_map<std::string, std::unique_ptr<Plan>> plans_;
  std::unordered_map<std::string, std::string> failed_;  // key -> why no plan
  std::string load_error_;  // why the last kept plan found was not used
  int64_t first_config_ = 0;  // TRACER_CUDNN_CONFIG
};

}  // namespace tracer::rt::cuda
