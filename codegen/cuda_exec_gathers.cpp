// The GPU executor's gathers and scatters: take_backward's five kernels, take_backward added in
// place into the tensor it is added to (tied embeddings), and the device flag through which
// take and take_backward report an index out of range (docs/codegen.md, "Gathers").
#include <algorithm>
#include <string>
#include <unordered_set>

#include "codegen/cuda_exec.h"
#include "codegen/cuda_reduce.h"
#include "ir/fusion.h"

namespace tracer::codegen {

using rt::cuda::DeviceTensor;
using K = ir::Arg::Kind;

void GpuExecutor::launch_take_backward(const SimpleKernel& k, void* first, rt::cuda::DevPtr grad, rt::cuda::DevPtr index,
                                       rt::cuda::DevPtr y) {
  auto grid = [&](long long threads) { return static_cast<unsigned>(std::max<long long>(1, std::min<long long>((threads + 255) / 256, 65535LL))); };
  rt::cuda::Buffer work(&dev_, static_cast<size_t>(k.partials) * sizeof(int));
  rt::cuda::DevPtr g = grad, ix = index, w = work.ptr, out = y, err = index_errors();
  void* args[] = {&g, &ix, &w, &out, &err};
  const std::string label = "prims.take_backward";
  void* f[5] = {first, nullptr, nullptr, nullptr, nullptr};
  for (int j = 2; j <= 5; ++j) f[j - 1] = compiled(k.source, k.symbol + "_" + std::to_string(j), label);
  index_check_pending_ = true;
  dev_.launch(f[0], grid(k.threads), 256, args);
  dev_.launch(f[1], grid(k.threads2), 256, args);
  dev_.launch(f[2], 1, 1024, args);
  dev_.launch(f[3], grid(k.threads2), 256, args);
  // Rows in turn over 16 blocks a multiprocessor (one block a row was 50304 tiny blocks).
  dev_.launch(f[4], static_cast<unsigned>(std::max<long long>(1, std::min<long long>(k.threads, 16LL * dev_.sm_count()))), 256, args);
  stats_.launches += 5;
}

bool GpuExecutor::run_take_backward_add(const std::vector<ir::Stmt>& stmts, size_t i, Values& env, size_t* j) {
  const ir::Stmt& s = stmts[i];
  if (s.kind != ir::StmtKind::Prim || !s.op || s.op->name != "take_backward" || s.outputs.size() != 1 || check_) return false;
  size_t k = i + 1;
  while (k < stmts.size() && stmts[k].kind == ir::StmtKind::Del) ++k;
  if (k == stmts.size()) return false;
  const ir::Stmt& a = stmts[k];
  if (a.kind != ir::StmtKind::Prim || !a.op || a.op->name != "add" || a.args.size() != 2 || a.outputs.size() != 1) return false;
  const ir::Proxy* t = s.outputs[0].get();
  int other = -1;
  for (int q = 0; q < 2; ++q)
    if (a.args[q].kind == K::Proxy && a.args[q].proxy.get() == t && a.args[1 - q].kind == K::Proxy && a.args[1 - q].proxy.get() != t)
      other = 1 - q;
  if (other < 0) return false;
  const ir::Proxy* addend = a.args[other].proxy.get();
  const ir::TensorType& want = s.outputs[0]->type;
  if (a.outputs[0]->type.dtype != want.dtype || a.outputs[0]->type.shape != want.shape) return false;
  // Both die at the add, and the addend's buffer is its own (no view, alias or caller holds it).
  std::unordered_set<const ir::Proxy*> dying;
  ir::dying_after(stmts, k, dying);
  if (!dying.count(t) || !dying.count(addend) || transposed_.count(addend) || views_.count(addend)) return false;
  auto it = env.find(addend);
  if (it == env.end()) return false;
  DeviceTensor& d = it->second;
  if (d.dtype != want.dtype || d.shape != want.shape || d.buffer.use_count() != 1 || d.offset != 0 || d.buffer->bytes != d.nbytes()) return false;
  auto g = env.find(s.args[0].kind == K::Proxy ? s.args[0].proxy.get() : nullptr);
  auto ix = env.find(s.args[1].kind == K::Proxy ? s.args[1].proxy.get() : nullptr);
  if (g == env.end() || ix == env.end() || transposed_.count(g->first) || transposed_.count(ix->first)) return false;
  auto sit = take_add_.find(&s);
  if (sit == take_add_.end()) {
    Simple sp;
    std::string why;
    sp.ok = generate_take_backward(s, &sp.kernel, &why, true) && sp.kernel.stages == 5;
    if (sp.ok) sp.fn = compiled(sp.kernel.source, sp.kernel.symbol, "prims.take_backward");
    sit = take_add_.emplace(&s, std::move(sp)).first;
  }
  if (!sit->second.ok) return false;
  launch_take_backward(sit->second.kernel, sit->second.fn, g->second.ptr(), ix->second.ptr(), d.ptr());
  DeviceTensor sum = std::move(d);
  env.erase(addend);
  env[a.outputs[0].get()] = std::move(sum);
  stats_.take_adds_in_place++;
  *j = k;
  return true;
}

namespace {
const unsigned long long kNoIndexError[3] = {0, 0, 0};  // flag, index, rows

[[noreturn]] void throw_index_error(const unsigned long long e[3]) {
  throw std::runtime_error(std::string(e[0] == 2 ? "prims.take_backward" : "prims.take") + ": index " +
                           std::to_string(static_cast<long long>(e[1])) + " is out of range for " +
                           std::to_string(static_cast<long long>(e[2])) + " rows");
}
}  // namespace

rt::cuda::DevPtr GpuExecutor::index_errors() {
  if (!index_err_) {
    index_err_ = std::make_shared<rt::cuda::Buffer>(&dev_, sizeof kNoIndexError);
    dev_.copy_to_device_async(index_err_->ptr, kNoIndexError, sizeof kNoIndexError);
  }
  return index_err_->ptr;
}

void GpuExecutor::read_index_errors_later() {
  if (!index_check_pending_ || in_graph_) return;
  if (!index_host_) {
    index_host_ = static_cast<unsigned long long*>(dev_.pinned_host(sizeof kNoIndexError));
    if (index_host_) index_event_ = take_event();
  }
  if (!index_host_) {  // no pinned memory: read it now
    check_index_errors();
    return;
  }
  index_check_pending_ = false;
  dev_.copy_to_host_async(index_host_, index_err_->ptr, sizeof kNoIndexError);
  dev_.record(index_event_, dev_.stream());
  index_read_pending_ = true;
}

void GpuExecutor::poll_index_errors(bool wait) {
  if (!index_read_pending_) return;
  if (wait)
    dev_.event_wait(index_event_);
  else if (!dev_.event_done(index_event_))
    return;
  index_read_pending_ = false;
  unsigned long long e[3] = {index_host_[0], index_host_[1], index_host_[2]};
  if (!e[0]) return;
  dev_.copy_to_device_async(index_err_->ptr, kNoIndexError, sizeof kNoIndexError);
  throw_index_error(e);
}

void GpuExecutor::check_index_errors() {
  if (in_graph_) return;
  if (index_check_pending_ && index_host_) read_index_errors_later();
  if (index_check_pending_) {  // no pinned memory: a copy that waits
    index_check_pending_ = false;
    dev_.synchronize();
    unsigned long long e[3] = {0, 0, 0};
    dev_.copy_to_host(e, index_err_->ptr, sizeof e);
    if (!e[0]) return;
    dev_.copy_to_device(index_err_->ptr, kNoIndexError, sizeof kNoIndexError);
    throw_index_error(e);
  }
  poll_index_errors(true);
}

}  // namespace tracer::codegen
