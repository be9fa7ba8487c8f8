// cuDNN's fused attention through its backend graph API; see cudnn.h and docs/cudnn.md. This
// file loads cuDNN, builds, caches and keeps plans, and runs them; the entry points, enum values
// and graph builder are in cudnn_graph.h, the attention graphs in cudnn_graph.cpp.
#include "runtime/cudnn.h"

#include "runtime/cudnn_graph.h"

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

using namespace cudnn_detail;

namespace {

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}
}  // namespace


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
  if (bias) {
    out << ":bias" << bias_b << ',' << bias_h;
    strides(bias_s);
  }
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

std::string arch_of(Device& dev) { return dev.arch(); }

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
  if (p.bias && (p.bias_s[3] != 1 || (p.bias_b != 1 && p.bias_b != p.b) || (p.bias_h != 1 && p.bias_h != p.h)))
    return "the mask is not [1 or b, 1 or h, s_q, s_kv] with the keys innermost";
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

void Cudnn::forward(const AttentionProblem& p, DevPtr q, DevPtr k, DevPtr v, DevPtr o, DevPtr stats, DevPtr ws, DevPtr bias) {
  Plan* plan = find(p, false);
  if (!plan) throw CudaError("cuDNN attention: the forward was not prepared");
  std::vector<std::pair<int64_t, DevPtr>> t = {{kQ, q}, {kK, k}, {kV, v}, {kO, o}, {kStats, stats}};
  if (p.bias) t.push_back({kBias, bias});
  execute(*plan, t, ws);
}

void Cudnn::backward(const AttentionProblem& p, DevPtr q, DevPtr k, DevPtr v, DevPtr o, DevPtr dout, DevPtr stats, DevPtr dq,
                     DevPtr dk, DevPtr dv, DevPtr row_sums, DevPtr dq_accum, DevPtr ws, DevPtr bias) {
  Plan* plan = find(p, true);
  if (!plan) throw CudaError("cuDNN attention: the backward was not prepared");
  std::vector<std::pair<int64_t, DevPtr>> t = {{kQ, q},   {kK, k},   {kV, v},   {kO, o},         {kDO, dout},   {kStats, stats},
                                               {kDQ, dq}, {kDK, dk}, {kDV, dv}, {kRowSum, row_sums}, {kDQAcc, dq_accum}};
  if (p.bias) t.push_back({kBias, bias});
  execute(*plan, t, ws);
}

}  // namespace tracer::rt::cuda
