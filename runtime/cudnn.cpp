// cuDNN's fused attention through its backend graph API; see cudnn.h and docs/cudnn.md. The
// entry points and enum values are declared here with the C types of cudnn_graph_v9.h (their
// values are stable across 9.x), so the build needs no cuDNN. The graphs are the composite
// forms cuDNN's fused flash engines recognise: for the forward, Q·Kᵀ, scale, the causal mask,
// a softmax that also gives the log-sum-exp, and P·V; for the backward, the same recomputation
// of P from the saved log-sum-exp and the three products of the gradients.
#include "runtime/cudnn.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace tracer::rt::cuda {

namespace {
// Descriptor types (cudnnBackendDescriptorType_t).
constexpr int kDescPointwise = 0, kDescEngine = 2, kDescEngineCfg = 3, kDescEngineHeur = 4, kDescPlan = 5, kDescOpPointwise = 13,
              kDescOpGraph = 15, kDescVariantPack = 16, kDescTensor = 17, kDescMatmul = 18, kDescOpMatmul = 19,
              kDescReduction = 21, kDescOpReduction = 22, kDescOpReshape = 31;
// Attribute value types (cudnnBackendAttributeType_t).
constexpr int kTypeHandle = 0, kTypeDataType = 1, kTypeBool = 2, kTypeInt64 = 3, kTypeVoidPtr = 6, kTypeHeurMode = 8,
              kTypePointwiseMode = 14, kTypeDesc = 15, kTypeReduceOp = 18, kTypeChar = 24;
// Attribute names (cudnnBackendAttributeName_t).
constexpr int kTensorAlign = 900, kTensorDataType = 901, kTensorDims = 902, kTensorStrides = 903, kTensorUid = 906,
              kTensorVirtual = 907, kTensorByValue = 908;
constexpr int kPwMode = 0, kPwPrec = 1, kPwAxis = 9;
constexpr int kOpPwDesc = 750, kOpPwX = 751, kOpPwB = 752, kOpPwY = 753, kOpPwT = 758;
constexpr int kMatmulComp = 1500, kOpMatmulA = 1520, kOpMatmulB = 1521, kOpMatmulC = 1522, kOpMatmulDesc = 1523;
constexpr int kReduceOp = 1600, kReduceComp = 1601, kOpReduceX = 1610, kOpReduceY = 1611, kOpReduceDesc = 1612;
constexpr int kOpReshapeX = 2200, kOpReshapeY = 2201;
constexpr int kGraphHandle = 800, kGraphOps = 801, kGraphEngineCount = 802;
constexpr int kEngineGraph = 1300, kEngineIndex = 1301, kCfgEngine = 300;
constexpr int kHeurMode = 200, kHeurGraph = 201, kHeurResults = 202;
constexpr int kPlanHandle = 400, kPlanConfig = 401, kPlanWorkspace = 402, kPlanJson = 405;
constexpr int kPackUids = 1000, kPackPointers = 1001, kPackWorkspace = 1003;
// Pointwise modes, data types, reductions, heuristics modes.
constexpr int kAdd = 0, kMul = 1, kDiv = 6, kSub = 9, kExp = 13, kLog = 15, kIdentity = 21, kCmpGe = 303,
              kGenIndex = 501, kBinarySelect = 601;
constexpr int kFloat = 0, kHalf = 2, kInt32 = 4, kBf16 = 9, kBoolean = 11;
constexpr int kReduceAdd = 0, kReduceMax = 3;
constexpr int kHeurA = 3, kHeurFallback = 2;

// The UIDs of the graphs' non-virtual tensors (the variant pack's names).
enum Uid : int64_t {
  kQ = 1, kK = 2, kV = 3, kO = 4, kStats = 5, kScale = 6, kDO = 7, kDQ = 8, kDK = 9, kDV = 10, kRowSum = 11, kDQAcc = 12,
  kNegInf = 13, kOne = 14, kFirstVirtual = 100
};

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}
}  // namespace

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

AttentionProblem AttentionProblem::contiguous(DType dt, int64_t b, int64_t h, int64_t s_q, int64_t s_kv, int64_t d, int64_t d_v,
                                              bool causal, float scale) {
  AttentionProblem p;
  p.dtype = dt;
  p.b = b;
  p.h = h;
  p.s_q = s_q;
  p.s_kv = s_kv;
  p.d = d;
  p.d_v = d_v;
  p.q = p.dq = packed(h, s_q, d);
  p.k = p.dk = packed(h, s_kv, d);
  p.v = p.dv = packed(h, s_kv, d_v);
  p.o = p.dout = packed(h, s_q, d_v);
  p.causal = causal;
  p.scale = scale;
  return p;
}

std::string AttentionProblem::key(bool backward) const {
  std::ostringstream out;
  out << (backward ? "bwd" : "fwd") << ':' << dtype_name(dtype) << ':' << b << ',' << h << ',' << s_q << ',' << s_kv << ','
    << d << ',' << d_v << ':' << (causal ? 'c' : 'n') << ':' << align << ':';
  uint32_t bits;
  std::memcpy(&bits, &scale, 4);
  out << std::hex << bits << std::dec;
  auto strides = [&](const Strides& s) { out << ':' << s[0] << ',' << s[1] << ',' << s[2] << ',' << s[3]; };
  strides(q);
  strides(k);
  strides(v);
  strides(o);
  if (backward) {
    strides(dout);
    strides(dq);
    strides(dk);
    strides(dv);
  }
  return out.str();
}

// A built plan and the descriptors it was built from (kept for its life).
struct Cudnn::Plan {
  CudnnApi* api = nullptr;
  std::vector<void*> descs;
  void* plan = nullptr;
  int64_t workspace = 0;
  bool causal = false;
  float scale = 1;
  ~Plan() {
    if (plan) api->be_destroy(plan);
    for (auto it = descs.rbegin(); it != descs.rend(); ++it) api->be_destroy(*it);
  }
};

namespace {

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

using Dims = GraphBuilder::Dims;

Dims swap_last(const AttentionProblem::Strides& s) { return {s[0], s[1], s[3], s[2]}; }

int io_type(DType dt) { return dt == DType::f16 ? kHalf : kBf16; }

// The forward: O = softmax(mask(Q Kᵀ * scale)) V and Stats = the rows' log-sum-exp.
void forward_graph(GraphBuilder& g, const AttentionProblem& p) {
  const int io = io_type(p.dtype);
  const int64_t b = p.b, h = p.h, sq = p.s_q, skv = p.s_kv;
  void* q = g.tensor(kQ, io, {b, h, sq, p.d}, p.q, false, p.align);
  void* kt = g.tensor(kK, io, {b, h, p.d, skv}, swap_last(p.k), false, p.align);
  void* v = g.tensor(kV, io, {b, h, skv, p.d_v}, p.v, false, p.align);
  void* scale = g.scalar(kScale);
  const Dims scores = {b, h, sq, skv}, rows = {b, h, sq, 1};
  void* s = g.mm(q, kt, scores);
  s = g.pw(kMul, s, scale, scores);
  if (p.causal) s = g.causal_mask(s, scores, g.scalar(kNegInf));
  void* m = g.reduce(kReduceMax, s, rows);
  void* e = g.pw(kSub, s, m, scores);
  e = g.pw(kExp, e, nullptr, scores);
  void* l = g.reduce(kReduceAdd, e, rows);
  void* logl = g.pw(kLog, l, nullptr, rows);
  g.pointwise(kAdd, m, logl, nullptr, g.tensor(kStats, kFloat, rows, {h * sq, sq, 1, 1}, false));
  void* prob = g.pw(kDiv, e, l, scores, io);  // the second product takes P in the I/O type
  g.matmul(prob, v, g.tensor(kO, io, {b, h, sq, p.d_v}, p.o, false, p.align));
}

// The backward: P recomputed from Stats, then dV = Pᵀ dO, dS = P (dO Vᵀ - rowsum(dO O)) * scale,
// dK = dSᵀ Q and dQ = dS K (accumulated in f32, then rounded).
void backward_graph(GraphBuilder& g, const AttentionProblem& p) {
  const int io = io_type(p.dtype);
  const int64_t b = p.b, h = p.h, sq = p.s_q, skv = p.s_kv;
  void* q = g.tensor(kQ, io, {b, h, sq, p.d}, p.q, false, p.align);
  void* kt = g.tensor(kK, io, {b, h, p.d, skv}, swap_last(p.k), false, p.align);
  void* vt = g.tensor(kV, io, {b, h, p.d_v, skv}, swap_last(p.v), false, p.align);
  void* o = g.tensor(kO, io, {b, h, sq, p.d_v}, p.o, false, p.align);
  void* dout = g.tensor(kDO, io, {b, h, sq, p.d_v}, p.dout, false, p.align);
  const Dims scores = {b, h, sq, skv}, rows = {b, h, sq, 1}, rows_packed = {h * sq, sq, 1, 1};
  void* stats = g.tensor(kStats, kFloat, rows, rows_packed, false);
  void* scale = g.scalar(kScale);
  void* one = g.scalar(kOne);
  // rowsum(dO * O), kept in the caller's f32 block.
  void* sum = g.pw(kMul, dout, o, {b, h, sq, p.d_v});
  sum = g.reduce(kReduceAdd, sum, rows);
  void* row_sum = g.tensor(kRowSum, kFloat, rows, rows_packed, false);
  g.pointwise(kMul, sum, one, nullptr, row_sum);
  // P = exp(mask(Q Kᵀ * scale - Stats)).
  void* s = g.mm(q, kt, scores);
  s = g.pw(kMul, s, scale, scores);
  s = g.pw(kSub, s, stats, scores);
  if (p.causal) s = g.causal_mask(s, scores, g.scalar(kNegInf));
  void* prob = g.pw(kExp, s, nullptr, scores);
  // dV = Pᵀ dO.
  const Dims transposed = {b, h, skv, sq}, transposed_strides = {h * sq * skv, sq * skv, 1, skv};
  void* prob_t = g.scratch(io, transposed, transposed_strides);
  g.reshape(prob, prob_t);
  g.matmul(prob_t, dout, g.tensor(kDV, io, {b, h, skv, p.d_v}, p.dv, false, p.align));
  // dS = P (dO Vᵀ - rowsum) * scale.
  void* ds = g.mm(dout, vt, scores);
  ds = g.pw(kSub, ds, row_sum, scores);
  ds = g.pw(kMul, ds, prob, scores);
  ds = g.pw(kMul, ds, scale, scores);
  // dK = dSᵀ Q.
  void* ds_t = g.scratch(io, transposed, transposed_strides);
  g.reshape(ds, ds_t);
  g.matmul(ds_t, q, g.tensor(kDK, io, {b, h, skv, p.d}, p.dk, false, p.align));
  // dQ = dS K, through the caller's f32 accumulator.
  void* k = g.scratch(io, {b, h, skv, p.d}, p.k);
  g.reshape(kt, k);
  void* acc = g.tensor(kDQAcc, kFloat, {b, h, sq, p.d}, AttentionProblem::packed(h, sq, p.d), false);
  g.matmul(ds, k, acc);
  g.pointwise(kIdentity, acc, nullptr, nullptr, g.tensor(kDQ, io, {b, h, sq, p.d}, p.dq, false, p.align));
}

std::string arch_of(Device& dev) { return dev.arch(); }

// A stand-in for cuDNN's descriptor calls that only records them (graph_tag): descriptors are
// nodes holding their attributes' bytes.
struct Recorded {
  int type = 0;
  std::unordered_map<int, std::string> attrs;  // name -> the elements' bytes
};
std::vector<std::unique_ptr<Recorded>>* recording = nullptr;
int rec_create(int type, void** d) {
  recording->push_back(std::make_unique<Recorded>());
  recording->back()->type = type;
  *d = recording->back().get();
  return 0;
}
int rec_destroy(void*) { return 0; }
int rec_finalize(void*) { return 0; }
int rec_set(void* d, int name, int type, int64_t n, const void* v) {
  size_t size = type == kTypeInt64 ? 8 : type == kTypeBool || type == kTypeChar ? 1 : type == kTypeDesc || type == kTypeHandle || type == kTypeVoidPtr ? sizeof(void*) : 4;
  static_cast<Recorded*>(d)->attrs[name] = std::string(static_cast<const char*>(v), static_cast<size_t>(n) * size);
  return 0;
}

template <class T>
std::vector<T> values(const Recorded& r, int name) {
  auto it = r.attrs.find(name);
  std::vector<T> out;
  if (it == r.attrs.end()) return out;
  out.resize(it->second.size() / sizeof(T));
  std::memcpy(out.data(), it->second.data(), out.size() * sizeof(T));
  return out;
}

}  // namespace

std::string Cudnn::graph_tag(const AttentionProblem& p, bool backward, std::vector<std::string>* tensors, std::string* detail) {
  std::vector<std::unique_ptr<Recorded>> nodes;
  recording = &nodes;
  CudnnApi fake;
  fake.be_create = rec_create;
  fake.be_destroy = rec_destroy;
  fake.be_finalize = rec_finalize;
  fake.be_set = rec_set;
  std::vector<void*> owned;
  GraphBuilder g(fake, owned);
  if (backward) {
    backward_graph(g, p);
  } else {
    forward_graph(g, p);
  }
  auto* graph = static_cast<Recorded*>(g.graph(nullptr, false));
  recording = nullptr;
  // Each operation by the name cuDNN's own tags use, in order; the graph's non-virtual tensors.
  std::string tag;
  std::unordered_map<const Recorded*, bool> seen;
  std::unordered_map<const Recorded*, size_t> virtual_ids;
  auto tensor_text = [&](const Recorded* t) {
    if (!t || seen[t] || values<uint8_t>(*t, kTensorVirtual) == std::vector<uint8_t>{1}) return;
    seen[t] = true;
    std::string x = "uid " + std::to_string(values<int64_t>(*t, kTensorUid).at(0)) + " type " +
                    std::to_string(values<int32_t>(*t, kTensorDataType).at(0)) + " dims";
    for (int64_t v : values<int64_t>(*t, kTensorDims)) x += " " + std::to_string(v);
    x += " strides";
    for (int64_t v : values<int64_t>(*t, kTensorStrides)) x += " " + std::to_string(v);
    if (!values<uint8_t>(*t, kTensorByValue).empty()) x += " by value";
    tensors->push_back(x);
  };
  for (void* op : values<void*>(*graph, kGraphOps)) {
    const Recorded& r = *static_cast<const Recorded*>(op);
    std::vector<int> ins;
    if (r.type == kDescOpMatmul) {
      tag += "Matmul_";
      if (detail) *detail += "Matmul";
      ins = {kOpMatmulA, kOpMatmulB, kOpMatmulC};
    } else if (r.type == kDescOpReduction) {
      tag += "Reduction_";
      if (detail) *detail += "Reduction";
      ins = {kOpReduceX, kOpReduceY};
    } else if (r.type == kDescOpReshape) {
      tag += "Reshape_";
      if (detail) *detail += "Reshape";
      ins = {kOpReshapeX, kOpReshapeY};
    } else {
      const Recorded& pw = *static_cast<const Recorded*>(values<void*>(r, kOpPwDesc).at(0));
      const int mode = values<int32_t>(pw, kPwMode).at(0);
      const std::unordered_map<int, const char*> names = {
          {kAdd, "ADD"}, {kMul, "MUL"}, {kDiv, "DIV"}, {kSub, "SUB"}, {kExp, "EXP"}, {kLog, "LOG"}, {kIdentity, "IDENTITY"},
          {kCmpGe, "CMP_GE"}, {kGenIndex, "GEN_INDEX"}, {kBinarySelect, "BINARY_SELECT"}};
      tag += std::string(names.count(mode) ? names.at(mode) : "?") + "_";
      if (detail) *detail += names.count(mode) ? names.at(mode) : "?";
      ins = {kOpPwX, kOpPwB, kOpPwT, kOpPwY};
    }
    for (int a : ins) {
      std::vector<void*> t = values<void*>(r, a);
      if (t.empty()) continue;
      const Recorded* x = static_cast<const Recorded*>(t[0]);
      tensor_text(x);
      if (!detail) continue;
      // Every operand, intermediates by their order of appearance.
      auto id = virtual_ids.emplace(x, virtual_ids.size()).first->second;
      const bool is_virtual = values<uint8_t>(*x, kTensorVirtual) == std::vector<uint8_t>{1};
      *detail += (is_virtual ? " v" + std::to_string(id) : " uid" + std::to_string(values<int64_t>(*x, kTensorUid).at(0))) + ":" +
                 std::to_string(values<int32_t>(*x, kTensorDataType).at(0));
      for (int64_t v : values<int64_t>(*x, kTensorDims)) *detail += "," + std::to_string(v);
      *detail += "/";
      for (int64_t v : values<int64_t>(*x, kTensorStrides)) *detail += std::to_string(v) + ",";
    }
    if (detail && r.type == kDescOpPointwise) {
      const Recorded& pw = *static_cast<const Recorded*>(values<void*>(r, kOpPwDesc).at(0));
      *detail += " prec " + std::to_string(values<int32_t>(pw, kPwPrec).at(0));
      if (!values<int64_t>(pw, kPwAxis).empty()) *detail += " axis " + std::to_string(values<int64_t>(pw, kPwAxis).at(0));
    }
    if (detail) *detail += "\n";
  }
  std::sort(tensors->begin(), tensors->end());
  return tag;
}

namespace {

}  // namespace

namespace {
// Loads cuDNN and binds its entry points, or returns null with the reason in *why.
std::shared_ptr<CudnnApi> load_cudnn(std::string* file, std::string* why) {
  std::vector<std::string> names;
  const char* env = std::getenv("TRACER_CUDNN_LIBRARY");
  if (env && *env) {
    names.push_back(env);
  } else {
    names = {"libcudnn.so.9", "libcudnn.so"};
  }
  std::string tried;
  void* h = nullptr;
  for (const auto& n : names) {
    // A library named by its path loads its own sub-libraries (libcudnn_graph.so.9, the engines)
    // by soname: load those beside it first, so that a second cuDNN on the search path is not
    // mixed in.
    if (n.find('/') != std::string::npos) {
      std::string dir = n.substr(0, n.rfind('/') + 1);
      for (const char* sub : {"libcudnn_graph.so.9", "libcudnn_heuristic.so.9", "libcudnn_engines_runtime_compiled.so.9",
                              "libcudnn_engines_precompiled.so.9", "libcudnn_ops.so.9", "libcudnn_cnn.so.9", "libcudnn_adv.so.9"})
        dlopen((dir + sub).c_str(), RTLD_NOW | RTLD_GLOBAL);
    }
    h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h) {
      *file = n;
      break;
    }
    const char* e = dlerror();
    tried += "\n  " + n + ": " + (e ? e : "not found");
  }
  if (!h) {
    *why = "cuDNN (libcudnn.so.9) was not found" + std::string(env && *env ? " at $TRACER_CUDNN_LIBRARY" : "") + ". Tried:" + tried;
    return nullptr;
  }
  auto api = std::make_shared<CudnnApi>();
  api->lib = h;
  std::string missing;
  auto bind = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
    if (!fn) missing += std::string(" ") + name;
  };
  bind(api->get_version, "cudnnGetVersion");
  bind(api->error_string, "cudnnGetErrorString");
  bind(api->create, "cudnnCreate");
  bind(api->destroy, "cudnnDestroy");
  bind(api->set_stream, "cudnnSetStream");
  bind(api->be_create, "cudnnBackendCreateDescriptor");
  bind(api->be_destroy, "cudnnBackendDestroyDescriptor");
  bind(api->be_finalize, "cudnnBackendFinalize");
  bind(api->be_set, "cudnnBackendSetAttribute");
  bind(api->be_get, "cudnnBackendGetAttribute");
  bind(api->be_execute, "cudnnBackendExecute");
  if (!missing.empty()) {
    *why = "cuDNN (" + *file + ") lacks:" + missing;
    return nullptr;
  }
  api->last_error = reinterpret_cast<void (*)(char*, size_t)>(dlsym(h, "cudnnGetLastErrorString"));
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(api->get_version), &info) && info.dli_fname) *file = info.dli_fname;
  return api;
}

std::string version_text(int v) {
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}
}  // namespace

std::string Cudnn::probe(int* version, std::string* library) {
  std::string why;
  std::shared_ptr<CudnnApi> api = load_cudnn(library, &why);
  if (api) *version = static_cast<int>(api->get_version());
  return why;
}

std::unique_ptr<Cudnn> Cudnn::open(Device& dev, const std::string& plan_dir, std::string* why) {
  std::string loaded;
  std::shared_ptr<CudnnApi> api = load_cudnn(&loaded, why);
  if (!api) return nullptr;
  std::unique_ptr<Cudnn> c(new Cudnn());
  c->dev_ = &dev;
  c->api_ = api;
  c->library_ = loaded;
  c->plan_dir_ = plan_dir;
  // TRACER_CUDNN_CONFIG=i: start at the heuristics' i-th configuration (for measuring them).
  if (const char* cfg = std::getenv("TRACER_CUDNN_CONFIG"); cfg && *cfg) c->first_config_ = std::max(0, std::atoi(cfg));
  c->version_ = static_cast<int>(api->get_version());
  if (c->version_ < 90000) {
    *why = "cuDNN " + c->version_string() + " (" + c->library_ + ") is older than 9.0, the first with these graphs";
    return nullptr;
  }
  dev.make_current();
  int rc = api->create(&c->handle_);
  if (rc != 0) {
    c->handle_ = nullptr;
    *why = "cudnnCreate failed: " + api->status(rc);
    return nullptr;
  }
  rc = api->set_stream(c->handle_, dev.stream());
  if (rc != 0) {
    *why = "cudnnSetStream failed: " + api->status(rc);
    return nullptr;
  }
  return c;
}

Cudnn::~Cudnn() {
  plans_.clear();
  if (handle_) api_->destroy(handle_);
}

std::string Cudnn::version_string() const { return version_text(version_); }

std::string Cudnn::unsupported(const AttentionProblem& p, bool backward, int compute_major, bool* by_version) const {
  if (by_version) *by_version = false;
  auto version_reason = [&](std::string why) {
    if (by_version) *by_version = true;
    return why;
  };
  if (p.dtype != DType::bf16 && p.dtype != DType::f16) return "cuDNN's fused attention takes bf16 and f16";
  if (compute_major < 8) return "cuDNN's fused attention needs sm_80 or newer";
  if (version_ >= 91000 && version_ < 91002)
    return version_reason("cuDNN " + version_string() + " has known fused-attention bugs (fixed in 9.10.2)");
  if (p.d % 8 || p.d_v % 8) return "head sizes must be multiples of 8";
  if (p.d != p.d_v) return "the values' head size differs from the queries'";
  const int64_t most = compute_major == 9 ? 256 : 128;
  if (p.d > most) return "head size " + std::to_string(p.d) + " is above " + std::to_string(most) + " on this GPU";
  if (p.align < 16) return "an operand is not 16-byte aligned";
  for (const auto* s : {&p.q, &p.k, &p.v, &p.o})
    if ((*s)[3] != 1) return "the head dimension is not innermost";
  if (backward)
    for (const auto* s : {&p.dout, &p.dq, &p.dk, &p.dv})
      if ((*s)[3] != 1) return "the head dimension is not innermost";
  if (backward && p.s_q == 1 && p.s_kv == 1) return "cuDNN has no backward for one query and one key";
  if (backward && p.s_kv % 128 != 0 && version_ < 91600)
    return version_reason("cuDNN " + version_string() + " has no backward engine for key lengths that are not multiples of 128 (" +
                          std::to_string(p.s_kv) + "; 9.16 has); $TRACER_CUDNN_LIBRARY can name a newer cuDNN");
  return "";
}

Cudnn::Plan* Cudnn::find(const AttentionProblem& p, bool backward) const {
  auto it = plans_.find(p.key(backward));
  return it == plans_.end() ? nullptr : it->second.get();
}

Cudnn::Prepared Cudnn::prepare(const AttentionProblem& p, bool backward) {
  Prepared r;
  const std::string key = p.key(backward);
  if (plans_.count(key)) return r;
  if (auto f = failed_.find(key); f != failed_.end()) {
    r.error = f->second;
    return r;
  }
  auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count(); };
  const CudnnApi& a = *api_;
  auto plan = std::make_unique<Plan>();
  plan->api = api_.get();
  plan->causal = p.causal;
  plan->scale = p.scale;
  // A plan kept from an earlier run: its JSON, after a line with the key it is for.
  const std::string full_key = key + ":" + arch_of(*dev_) + ":" + std::to_string(version_);
  std::string path;
  if (!plan_dir_.empty()) {
    char name[64];
    std::snprintf(name, sizeof name, "/cudnn-%016llx.plan", static_cast<unsigned long long>(fnv1a(full_key)));
    path = plan_dir_ + name;
    std::ifstream in(path, std::ios::binary);
    std::string first, json;
    if (in && std::getline(in, first) && first == full_key) {
      std::stringstream rest;
      rest << in.rdbuf();
      json = rest.str();
      void* d = nullptr;
      if (!json.empty() && a.be_create(kDescPlan, &d) == 0) {
        int rc = a.be_set(d, kPlanHandle, kTypeHandle, 1, &handle_);
        if (rc == 0) rc = a.be_set(d, kPlanJson, kTypeChar, static_cast<int64_t>(json.size()), json.data());
        if (rc == 0) rc = a.be_finalize(d);
        int64_t n = 0;
        if (rc == 0) rc = a.be_get(d, kPlanWorkspace, kTypeInt64, 1, &n, &plan->workspace);
        if (rc == 0) {
          plan->plan = d;
          r.loaded = true;
          r.ms = elapsed();
          plans_.emplace(key, std::move(plan));
          return r;
        }
        load_error_ = "the kept plan " + path + " did not load: " + a.status(rc);
        a.be_destroy(d);  // stale or unreadable: built again below
      }
    }
  }
  try {
    GraphBuilder g(a, plan->descs);
    if (backward) {
      backward_graph(g, p);
    } else {
      forward_graph(g, p);
    }
    // The handle tells the heuristics which device the plan is for (9.8 made it optional only
    // for graphs given device properties instead).
    void* graph = g.graph(handle_, true);
    // Engine configurations by heuristics (mode A, then the fallback list); the first whose
    // plan finalizes wins. Finalizing compiles the engine's kernel.
    std::string last;
    auto try_config = [&](void* cfg) {
      void* d = nullptr;
      if (a.be_create(kDescPlan, &d) != 0) return;
      int rc = a.be_set(d, kPlanHandle, kTypeHandle, 1, &handle_);
      if (rc == 0) rc = a.be_set(d, kPlanConfig, kTypeDesc, 1, &cfg);
      if (rc == 0) rc = a.be_finalize(d);
      int64_t n = 0;
      if (rc == 0) rc = a.be_get(d, kPlanWorkspace, kTypeInt64, 1, &n, &plan->workspace);
      if (rc == 0) {
        plan->plan = d;
      } else {
        last = a.status(rc);
        a.be_destroy(d);
      }
    };
    for (int mode : {kHeurA, kHeurFallback}) {
      void* heur = g.make(kDescEngineHeur, "cudnnBackendCreateDescriptor(engine heuristics)");
      g.set_desc(heur, kHeurGraph, graph, "engine heuristics operation graph");
      g.set(heur, kHeurMode, kTypeHeurMode, 1, &mode, "engine heuristics mode");
      if (a.be_finalize(heur) != 0) continue;
      int64_t count = 0;
      if (a.be_get(heur, kHeurResults, kTypeDesc, 0, &count, nullptr) != 0 || count <= 0) {
        if (last.empty()) last = "cuDNN's heuristics have no engine for this graph";
        continue;
      }
      std::vector<void*> cfgs(static_cast<size_t>(count));
      for (auto& c : cfgs) c = g.make(kDescEngineCfg, "cudnnBackendCreateDescriptor(engine config)");
      int64_t got = 0;
      if (a.be_get(heur, kHeurResults, kTypeDesc, count, &got, cfgs.data()) != 0) continue;
      for (int64_t i = mode == kHeurA ? std::min<int64_t>(first_config_, got - 1) : 0; i < got && !plan->plan; ++i)
        try_config(cfgs[static_cast<size_t>(i)]);
      if (plan->plan) break;
    }
    // Then every engine the graph has, by index, as cuDNN numbers them.
    int64_t engines = 0, n = 0;
    if (!plan->plan && a.be_get(graph, kGraphEngineCount, kTypeInt64, 1, &n, &engines) == 0) {
      if (engines == 0 && last.empty()) last = "the operation graph has no engine";
      for (int64_t i = 0; i < engines && !plan->plan; ++i) {
        void* e = g.make(kDescEngine, "cudnnBackendCreateDescriptor(engine)");
        if (a.be_set(e, kEngineGraph, kTypeDesc, 1, &graph) != 0 || a.be_set(e, kEngineIndex, kTypeInt64, 1, &i) != 0) continue;
        int rc = a.be_finalize(e);
        if (rc != 0) {
          last = "engine " + std::to_string(i) + ": " + a.status(rc);
          continue;
        }
        void* cfg = g.make(kDescEngineCfg, "cudnnBackendCreateDescriptor(engine config)");
        if (a.be_set(cfg, kCfgEngine, kTypeDesc, 1, &e) != 0 || a.be_finalize(cfg) != 0) continue;
        try_config(cfg);
      }
    }
    if (!plan->plan)
      throw CudaError("no engine configuration of cuDNN " + version_string() + " finalized" + (last.empty() ? "" : ": " + last));
  } catch (const CudaError& e) {
    r.error = e.what();
    failed_.emplace(key, r.error);
    r.ms = elapsed();
    return r;
  }
  r.built = true;
  // Kept for the next run where cuDNN can serialize the plan (written whole, then renamed).
  if (!path.empty()) {
    int64_t n = 0;
    std::string json(1 << 20, '\0');
    if (a.be_get(plan->plan, kPlanJson, kTypeChar, static_cast<int64_t>(json.size()), &n, json.data()) == 0 && n > 0 &&
        n < static_cast<int64_t>(json.size())) {
      json.resize(static_cast<size_t>(n));
      while (!json.empty() && json.back() == '\0') json.pop_back();
      std::error_code ec;
      std::filesystem::create_directories(plan_dir_, ec);
      std::string tmp = path + ".tmp" + std::to_string(reinterpret_cast<uintptr_t>(this));
      {
        std::ofstream out(tmp, std::ios::binary);
        out << full_key << "\n" << json;
      }
      if (std::rename(tmp.c_str(), path.c_str()) != 0) std::remove(tmp.c_str());
    }
  }
  r.ms = elapsed();
  plans_.emplace(key, std::move(plan));
  return r;
}

size_t Cudnn::engine_workspace(const AttentionProblem& p, bool backward) const {
  Plan* plan = find(p, backward);
  return plan ? static_cast<size_t>(plan->workspace) : 0;
}

std::string Cudnn::describe(const AttentionProblem& p, bool backward) const {
  Plan* plan = find(p, backward);
  if (!plan) return "";
  std::string json(1 << 20, '\0');
  int64_t n = 0;
  if (api_->be_get(plan->plan, kPlanJson, kTypeChar, static_cast<int64_t>(json.size()), &n, json.data()) != 0 || n <= 0) return "";
  json.resize(static_cast<size_t>(std::min<int64_t>(n, static_cast<int64_t>(json.size()))));
  while (!json.empty() && json.back() == '\0') json.pop_back();
  return json;
}

void Cudnn::execute(Plan& plan, const std::vector<std::pair<int64_t, DevPtr>>& tensors, DevPtr ws) {
  // By-value scalars travel as host pointers, read when the work is issued.
  float scale = plan.scale, one = 1.0f;
  float neg_inf = version_ >= 91000 ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::lowest();
  std::vector<int64_t> uids;
  std::vector<void*> ptrs;
  for (const auto& [uid, ptr] : tensors) {
    uids.push_back(uid);
    ptrs.push_back(reinterpret_cast<void*>(static_cast<uintptr_t>(ptr)));
  }
  uids.push_back(kScale);
  ptrs.push_back(&scale);
  if (plan.causal) {
    uids.push_back(kNegInf);
    ptrs.push_back(&neg_inf);
  }
  if (tensors.size() > 6) {  // the backward's
    uids.push_back(kOne);
    ptrs.push_back(&one);
  }
  const CudnnApi& a = *api_;
  void* pack = nullptr;
  a.check(a.be_create(kDescVariantPack, &pack), "cudnnBackendCreateDescriptor(variant pack)");
  struct Guard {
    const CudnnApi& a;
    void* d;
    ~Guard() { a.be_destroy(d); }
  } guard{a, pack};
  void* wsp = reinterpret_cast<void*>(static_cast<uintptr_t>(ws));
  a.check(a.be_set(pack, kPackUids, kTypeInt64, static_cast<int64_t>(uids.size()), uids.data()), "variant pack unique ids");
  a.check(a.be_set(pack, kPackPointers, kTypeVoidPtr, static_cast<int64_t>(ptrs.size()), ptrs.data()), "variant pack pointers");
  a.check(a.be_set(pack, kPackWorkspace, kTypeVoidPtr, 1, &wsp), "variant pack workspace");
  a.check(a.be_finalize(pack), "cudnnBackendFinalize(variant pack)");
  dev_->make_current();
  a.check(a.be_execute(handle_, plan.plan, pack), "cudnnBackendExecute");
}

void Cudnn::forward(const AttentionProblem& p, DevPtr q, DevPtr k, DevPtr v, DevPtr o, DevPtr stats, DevPtr ws) {
  Plan* plan = find(p, false);
  if (!plan) throw CudaError("cuDNN attention: the forward was not prepared");
  execute(*plan, {{kQ, q}, {kK, k}, {kV, v}, {kO, o}, {kStats, stats}}, ws);
}

void Cudnn::backward(const AttentionProblem& p, DevPtr q, DevPtr k, DevPtr v, DevPtr o, DevPtr dout, DevPtr stats, DevPtr dq,
                     DevPtr dk, DevPtr dv, DevPtr row_sums, DevPtr dq_accum, DevPtr ws) {
  Plan* plan = find(p, true);
  if (!plan) throw CudaError("cuDNN attention: the backward was not prepared");
  execute(*plan,
          {{kQ, q}, {kK, k}, {kV, v}, {kO, o}, {kDO, dout}, {kStats, stats}, {kDQ, dq}, {kDK, dk}, {kDV, dv},
           {kRowSum, row_sums}, {kDQAcc, dq_accum}},
          ws);
}

}  // namespace tracer::rt::cuda
