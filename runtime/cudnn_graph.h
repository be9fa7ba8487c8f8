// cuDNN's backend API as runtime/cudnn.cpp and cudnn_graph.cpp use it (internal to the runtime):
// the entry points, the enum values of cudnn_graph_v9.h (stable across 9.x, declared here so
// that the build needs no cuDNN), and the builder of operation graphs.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/cuda.h"
#include "runtime/cudnn.h"

namespace tracer::rt::cuda {

struct CudnnApi {
  void* lib = nullptr;
  size_t (*get_version)() = nullptr;
  const char* (*error_string)(int) = nullptr;
  void (*last_error)(char*, size_t) = nullptr;  // 9.0 on; may be absent
  int (*create)(void**) = nullptr;
  int (*destroy)(void*) = nullptr;
  int (*set_stream)(void*, void*) = nullptr;
  int (*be_create)(int, void**) = nullptr;
  int (*be_destroy)(void*) = nullptr;
  int (*be_finalize)(void*) = nullptr;
  int (*be_set)(void*, int, int, int64_t, const void*) = nullptr;
  int (*be_get)(void*, int, int, int64_t, int64_t*, void*) = nullptr;
  int (*be_execute)(void*, void*, void*) = nullptr;
  // Like the driver, cuDNN stays loaded for the life of the process.

  std::string status(int rc) const {
    std::string s = error_string ? error_string(rc) : "status " + std::to_string(rc);
    if (last_error) {
      char buf[1024] = {0};
      last_error(buf, sizeof buf);
      if (buf[0]) s += " (" + std::string(buf) + ")";
    }
    return s;
  }
  void check(int rc, const char* what) const {
    if (rc != 0) throw CudaError(std::string(what) + ": " + status(rc));
  }
};

namespace cudnn_detail {

// Descriptor types (cudnnBackendDescriptorType_t).
inline constexpr int kDescPointwise = 0, kDescEngine = 2, kDescEngineCfg = 3, kDescEngineHeur = 4, kDescPlan = 5, kDescOpPointwise = 13,
              kDescOpGraph = 15, kDescVariantPack = 16, kDescTensor = 17, kDescMatmul = 18, kDescOpMatmul = 19,
              kDescReduction = 21, kDescOpReduction = 22, kDescOpReshape = 31;
// Attribute value types (cudnnBackendAttributeType_t).
inline constexpr int kTypeHandle = 0, kTypeDataType = 1, kTypeBool = 2, kTypeInt64 = 3, kTypeVoidPtr = 6, kTypeHeurMode = 8,
              kTypePointwiseMode = 14, kTypeDesc = 15, kTypeReduceOp = 18, kTypeChar = 24;
// Attribute names (cudnnBackendAttributeName_t).
inline constexpr int kTensorAlign = 900, kTensorDataType = 901, kTensorDims = 902, kTensorStrides = 903, kTensorUid = 906,
              kTensorVirtual = 907, kTensorByValue = 908;
inline constexpr int kPwMode = 0, kPwPrec = 1, kPwAxis = 9;
inline constexpr int kOpPwDesc = 750, kOpPwX = 751, kOpPwB = 752, kOpPwY = 753, kOpPwT = 758;
inline constexpr int kMatmulComp = 1500, kOpMatmulA = 1520, kOpMatmulB = 1521, kOpMatmulC = 1522, kOpMatmulDesc = 1523;
inline constexpr int kReduceOp = 1600, kReduceComp = 1601, kOpReduceX = 1610, kOpReduceY = 1611, kOpReduceDesc = 1612;
inline constexpr int kOpReshapeX = 2200, kOpReshapeY = 2201;
inline constexpr int kGraphHandle = 800, kGraphOps = 801, kGraphEngineCount = 802;
inline constexpr int kEngineGraph = 1300, kEngineIndex = 1301, kCfgEngine = 300;
inline constexpr int kHeurMode = 200, kHeurGraph = 201, kHeurResults = 202;
inline constexpr int kPlanHandle = 400, kPlanConfig = 401, kPlanWorkspace = 402, kPlanJson = 405;
inline constexpr int kPackUids = 1000, kPackPointers = 1001, kPackWorkspace = 1003;
// Pointwise modes, data types, reductions, heuristics modes.
inline constexpr int kAdd = 0, kMul = 1, kDiv = 6, kSub = 9, kExp = 13, kLog = 15, kIdentity = 21, kCmpGe = 303,
              kGenIndex = 501, kBinarySelect = 601;
inline constexpr int kFloat = 0, kHalf = 2, kInt32 = 4, kBf16 = 9, kBoolean = 11;
inline constexpr int kReduceAdd = 0, kReduceMax = 3;
inline constexpr int kHeurA = 3, kHeurFallback = 2;

// The UIDs of the graphs' non-virtual tensors (the variant pack's names).
enum Uid : int64_t {
  kQ = 1, kK = 2, kV = 3, kO = 4, kStats = 5, kScale = 6, kDO = 7, kDQ = 8, kDK = 9, kDV = 10, kRowSum = 11, kDQAcc = 12,
  kNegInf = 13, kOne = 14, kBias = 15, kFirstVirtual = 100
};


// Builds one operation graph: descriptors made, set and finalized, each failure a CudaError
// naming the call. Every descriptor goes to `owned` (the plan keeps them).
class GraphBuilder {
 public:
  GraphBuilder(const CudnnApi& a, std::vector<void*>& owned) : a_(a), owned_(owned) {}

  void* make(int type, const char* what) {
    void* d = nullptr;
    a_.check(a_.be_create(type, &d), what);
    owned_.push_back(d);
    return d;
  }
  void set(void* d, int name, int type, int64_t n, const void* v, const char* what) {
    a_.check(a_.be_set(d, name, type, n, v), what);
  }
  void set_desc(void* d, int name, void* value, const char* what) { set(d, name, kTypeDesc, 1, &value, what); }
  void finalize(void* d, const char* what) { a_.check(a_.be_finalize(d), what); }

  using Dims = std::array<int64_t, 4>;
  void* tensor(int64_t uid, int dtype, const Dims& dims, const Dims& strides, bool is_virtual, int64_t align = 16,
               bool by_value = false) {
    void* t = make(kDescTensor, "cudnnBackendCreateDescriptor(tensor)");
    int64_t a = align;
    set(t, kTensorDataType, kTypeDataType, 1, &dtype, "tensor data type");
    set(t, kTensorDims, kTypeInt64, 4, dims.data(), "tensor dimensions");
    set(t, kTensorStrides, kTypeInt64, 4, strides.data(), "tensor strides");
    set(t, kTensorUid, kTypeInt64, 1, &uid, "tensor unique id");
    set(t, kTensorAlign, kTypeInt64, 1, &a, "tensor alignment");
    bool v = is_virtual, bv = by_value;
    set(t, kTensorVirtual, kTypeBool, 1, &v, "tensor is_virtual");
    if (by_value) set(t, kTensorByValue, kTypeBool, 1, &bv, "tensor is_by_value");
    finalize(t, "cudnnBackendFinalize(tensor)");
    return t;
  }
  // A virtual (intermediate) tensor, packed.
  void* scratch(int dtype, const Dims& dims) {
    Dims s = {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3], 1};
    return tensor(next_uid_++, dtype, dims, s, true);
  }
  void* scratch(int dtype, const Dims& dims, const Dims& strides) { return tensor(next_uid_++, dtype, dims, strides, true); }
  void* scalar(int64_t uid) { return tensor(uid, kFloat, {1, 1, 1, 1}, {1, 1, 1, 1}, false, 16, true); }

  // y = mode(x[, b[, t]]) elementwise (with broadcasting), computed in `prec`.
  void pointwise(int mode, void* x, void* b, void* t, void* y, int prec = kFloat, int64_t axis = -1) {
    void* pw = make(kDescPointwise, "cudnnBackendCreateDescriptor(pointwise)");
    set(pw, kPwMode, kTypePointwiseMode, 1, &mode, "pointwise mode");
    set(pw, kPwPrec, kTypeDataType, 1, &prec, "pointwise math precision");
    if (axis >= 0) set(pw, kPwAxis, kTypeInt64, 1, &axis, "pointwise axis");
    finalize(pw, "cudnnBackendFinalize(pointwise)");
    void* op = make(kDescOpPointwise, "cudnnBackendCreateDescriptor(pointwise operation)");
    set_desc(op, kOpPwDesc, pw, "pointwise operation descriptor");
    set_desc(op, kOpPwX, x, "pointwise operation x");
    if (b) set_desc(op, kOpPwB, b, "pointwise operation b");
    if (t) set_desc(op, kOpPwT, t, "pointwise operation t");
    set_desc(op, kOpPwY, y, "pointwise operation y");
    finalize(op, "cudnnBackendFinalize(pointwise operation)");
    ops_.push_back(op);
  }
  void matmul(void* a, void* b, void* c) {
    void* mm = make(kDescMatmul, "cudnnBackendCreateDescriptor(matmul)");
    int comp = kFloat;
    set(mm, kMatmulComp, kTypeDataType, 1, &comp, "matmul compute type");
    finalize(mm, "cudnnBackendFinalize(matmul)");
    void* op = make(kDescOpMatmul, "cudnnBackendCreateDescriptor(matmul operation)");
    set_desc(op, kOpMatmulA, a, "matmul a");
    set_desc(op, kOpMatmulB, b, "matmul b");
    set_desc(op, kOpMatmulC, c, "matmul c");
    set_desc(op, kOpMatmulDesc, mm, "matmul descriptor");
    finalize(op, "cudnnBackendFinalize(matmul operation)");
    ops_.push_back(op);
  }
  void reduction(int which, void* x, void* y) {
    void* r = make(kDescReduction, "cudnnBackendCreateDescriptor(reduction)");
    int comp = kFloat;
    set(r, kReduceOp, kTypeReduceOp, 1, &which, "reduction operator");
    set(r, kReduceComp, kTypeDataType, 1, &comp, "reduction compute type");
    finalize(r, "cudnnBackendFinalize(reduction)");
    void* op = make(kDescOpReduction, "cudnnBackendCreateDescriptor(reduction operation)");
    set_desc(op, kOpReduceX, x, "reduction x");
    set_desc(op, kOpReduceY, y, "reduction y");
    set_desc(op, kOpReduceDesc, r, "reduction descriptor");
    finalize(op, "cudnnBackendFinalize(reduction operation)");
    ops_.push_back(op);
  }
  void reshape(void* x, void* y) {
    void* op = make(kDescOpReshape, "cudnnBackendCreateDescriptor(reshape operation)");
    set_desc(op, kOpReshapeX, x, "reshape x");
    set_desc(op, kOpReshapeY, y, "reshape y");
    finalize(op, "cudnnBackendFinalize(reshape operation)");
    ops_.push_back(op);
  }
  // The causal mask on scores s: where key > query, s becomes -inf.
  void* causal_mask(void* s, const Dims& dims, void* neg_inf) {
    void* row = scratch(kInt32, dims);
    void* col = scratch(kInt32, dims);
    void* keep = scratch(kBoolean, dims);
    void* out = scratch(kFloat, dims);
    pointwise(kGenIndex, s, nullptr, nullptr, row, kInt32, 2);
    pointwise(kGenIndex, s, nullptr, nullptr, col, kInt32, 3);
    pointwise(kCmpGe, row, col, nullptr, keep, kBoolean);
    pointwise(kBinarySelect, s, neg_inf, keep, out);
    return out;
  }

  // The same into a new intermediate (f32 unless said): the graphs as expressions.
  void* pw(int mode, void* x, void* b, const Dims& dims, int dtype = kFloat) {
    void* y = scratch(dtype, dims);
    pointwise(mode, x, b, nullptr, y);
    return y;
  }
  void* mm(void* a, void* b, const Dims& dims) {
    void* c = scratch(kFloat, dims);
    matmul(a, b, c);
    return c;
  }
  void* reduce(int which, void* x, const Dims& dims) {
    void* y = scratch(kFloat, dims);
    reduction(which, x, y);
    return y;
  }

  void* graph(void* handle, bool set_handle) {
    void* g = make(kDescOpGraph, "cudnnBackendCreateDescriptor(operation graph)");
    if (set_handle) set(g, kGraphHandle, kTypeHandle, 1, &handle, "operation graph handle");
    set(g, kGraphOps, kTypeDesc, static_cast<int64_t>(ops_.size()), ops_.data(), "operation graph operations");
    finalize(g, "cudnnBackendFinalize(operation graph)");
    return g;
  }

 private:
  const CudnnApi& a_;
  std::vector<void*>& owned_;
  std::vector<void*> ops_;
  int64_t next_uid_ = kFirstVirtual;
};

// The attention graphs (cudnn_graph.cpp).
void forward_graph(GraphBuilder& g, const AttentionProblem& p);
void backward_graph(GraphBuilder& g, const AttentionProblem& p);

}  // namespace cudnn_detail
}  // namespace tracer::rt::cuda
