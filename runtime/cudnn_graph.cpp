// The attention graphs cuDNN's fused flash engines recognise (docs/cudnn.md, "The graphs"):
// for the forward, Q·Kᵀ, scale, the causal mask, a softmax that also gives the log-sum-exp, and
// P·V; for the backward, the same recomputation of P from the saved log-sum-exp and the three
// products of the gradients. And Cudnn::graph_tag, which records them without cuDNN.
#include "runtime/cudnn_graph.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <unordered_map>

namespace tracer::rt::cuda {
namespace cudnn_detail {
namespace {

using Dims = GraphBuilder::Dims;

Dims swap_last(const AttentionProblem::Strides& s) { return {s[0], s[1], s[3], s[2]}; }

int io_type(DType dt) { return dt == DType::f16 ? kHalf : kBf16; }

}  // namespace

// The forward: O = softmax(mask(Q Kᵀ * scale + bias)) V and Stats = the rows' log-sum-exp.
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
  if (p.bias) s = g.pw(kAdd, s, g.tensor(kBias, io, {p.bias_b, p.bias_h, sq, skv}, p.bias_s, false, p.align), scores);
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
  if (p.bias) s = g.pw(kAdd, s, g.tensor(kBias, io, {p.bias_b, p.bias_h, sq, skv}, p.bias_s, false, p.align), scores);
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

}  // namespace cudnn_detail

namespace {
using namespace cudnn_detail;

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

}  // namespace tracer::rt::cuda
