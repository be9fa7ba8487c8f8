// Value basics: names of types, equality, hashing, truth, and repr/str.
#include "interpreter/value.h"
#include "interpreter/compiled.h"
#include "interpreter/device.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

namespace tracer::interp {

namespace {
// Nesting that printing, comparing and hashing follow before giving up (as Python's recursion
// limit does), far below what the native stack holds.
constexpr int kMaxNesting = 1000;
thread_local int nesting = 0;
struct Nest {
  explicit Nest(const char* what) {
    if (++nesting > kMaxNesting) {
      --nesting;
      throw std::runtime_error(std::string("maximum nesting depth (") + std::to_string(kMaxNesting) + ") exceeded while " + what);
    }
  }
  ~Nest() { --nesting; }
};
}  // namespace

std::string TensorObj::device() const { return dev && backend ? backend->device() : std::string("cpu"); }

const rt::Tensor& TensorObj::host(rt::Allocator* al) {
  if (!t.defined() && dev) {
    if (!backend) throw std::runtime_error("a device tensor without its device (internal error; please report this)");
    if (dev->buffer && !dev->buffer->stale.empty()) throw std::runtime_error(dev->buffer->stale);
    t = backend->download(*dev, al);
  }
  return t;
}

const char* type_name(VT t) {
  switch (t) {
    case VT::None: return "NoneType";
    case VT::Bool: return "bool";
    case VT::Int: return "int";
    case VT::Float: return "float";
    case VT::DType: return "dtype";
    case VT::Unbound: return "unbound";
    case VT::Ellipsis: return "ellipsis";
    case VT::Slice: return "slice";
    case VT::Stmt: return "statement";
    case VT::Recording: return "recording";
    case VT::Compiled: return "compiled function";
    case VT::Str: return "str";
    case VT::List: return "list";
    case VT::Tuple: return "tuple";
    case VT::Dict: return "dict";
    case VT::Function: return "function";
    case VT::Builtin: return "builtin_function";
    case VT::BoundMethod: return "method";
    case VT::Tensor: return "tensor";
    case VT::Proxy: return "proxy";
    case VT::Trace: return "trace";
    case VT::Type: return "type";
    case VT::Namespace: return "module";
    case VT::Op: return "op";
    case VT::Range: return "range";
    case VT::Cell: return "cell";
    case VT::Region: return "region";
  }
  return "value";
}

size_t ValueHash::operator()(const Value& v) const {
  switch (v.type()) {
    case VT::None: return 0x9e37;
    case VT::Bool: return std::hash<int64_t>()(v.as_bool());
    case VT::Int: return std::hash<int64_t>()(v.as_int());
    case VT::Float: {
      double f = v.as_float();
      if (f == std::floor(f) && std::fabs(f) < 9e18) return std::hash<int64_t>()(static_cast<int64_t>(f));
      return std::hash<double>()(f);
    }
    case VT::DType: return 0x51ed + static_cast<size_t>(v.as_int());
    case VT::Str: return std::hash<std::string>()(v.as<StrObj>()->s);
    case VT::Tuple: {
      Nest n("hashing");
      size_t h = 0x345678;
      for (const Value& x : v.as<TupleObj>()->items) h = h * 1000003 ^ (*this)(x);
      return h;
    }
    case VT::Proxy: return std::hash<const void*>()(v.as<ProxyObj>()->p.get());
    default: return std::hash<const void*>()(v.obj());
  }
}

bool ValueEq::operator()(const Value& a, const Value& b) const { return values_equal(a, b); }

namespace {
thread_local ContainerHeap* current_heap = nullptr;
}  // namespace

HeapScope::HeapScope(ContainerHeap& heap) : prev_(current_heap) { current_heap = &heap; }
HeapScope::~HeapScope() { current_heap = prev_; }

Container::Container(VT t) : Object(t), heap(current_heap) {
  if (!heap) return;
  std::lock_guard<std::mutex> lock(heap->mutex_);
  gc_next = heap->head_;
  if (heap->head_) heap->head_->gc_prev = this;
  heap->head_ = this;
}

Container::~Container() {
  if (!heap) return;
  std::lock_guard<std::mutex> lock(heap->mutex_);
  if (gc_prev) gc_prev->gc_next = gc_next;
  else heap->head_ = gc_next;
  if (gc_next) gc_next->gc_prev = gc_prev;
}

ContainerHeap::~ContainerHeap() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Container* c = head_; c;) {
    Container* next = c->gc_next;
    c->heap = nullptr;
    c->gc_prev = c->gc_next = nullptr;
    c = next;
  }
  head_ = nullptr;
}

size_t ContainerHeap::size() {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t n = 0;
  for (Container* c = head_; c; c = c->gc_next) ++n;
  return n;
}

size_t ContainerHeap::collect_cycles() {
  std::vector<Value> garbage;  // held while their items are cleared, then released
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::unordered_map<const Object*, int64_t> outside;  // references from outside the containers
    for (Container* c = head_; c; c = c->gc_next) outside[c] = c->refs;
    auto children = [](Container* c, const auto& f) {
      if (c->type == VT::List) {
        for (const Value& v : static_cast<ListObj*>(c)->items) f(v);
      } else if (c->type == VT::Tuple) {
        for (const Value& v : static_cast<TupleObj*>(c)->items) f(v);
      } else {
        for (const auto& [k, v] : static_cast<DictObj*>(c)->entries) {
          f(k);
          f(v);
        }
      }
    };
    for (Container* c = head_; c; c = c->gc_next)
      children(c, [&](const Value& v) {
        if (!v.is_obj()) return;
        auto it = outside.find(v.obj());
        if (it != outside.end()) --it->second;
      });
    // What outside references reach stays; the rest is only cycles.
    std::vector<Container*> stack;
    std::unordered_set<const Object*> reached;
    for (Container* c = head_; c; c = c->gc_next)
      if (outside[c] > 0 && reached.insert(c).second) stack.push_back(c);
    while (!stack.empty()) {
      Container* c = stack.back();
      stack.pop_back();
      children(c, [&](const Value& v) {
        if (v.is_obj() && outside.count(v.obj()) && reached.insert(v.obj()).second)
          stack.push_back(static_cast<Container*>(v.obj()));
      });
    }
    for (Container* c = head_; c; c = c->gc_next)
      if (!reached.count(c)) garbage.emplace_back(c);
  }
  for (Value& g : garbage) {  // outside the lock: clearing frees containers, which unregister
    Object* o = g.obj();
    if (o->type == VT::List) static_cast<ListObj*>(o)->items.clear();
    else if (o->type == VT::Tuple) static_cast<TupleObj*>(o)->items.clear();
    else static_cast<DictObj*>(o)->clear();
  }
  size_t n = garbage.size();
  garbage.clear();
  return n;
}

void release_object(Object* o) {
  // The outermost release frees; the releases its destructor sets off only queue.
  thread_local std::vector<Object*> pending;
  thread_local bool draining = false;
  pending.push_back(o);
  if (draining) return;
  draining = true;
  while (!pending.empty()) {
    Object* x = pending.back();
    pending.pop_back();
    delete x;
  }
  draining = false;
}


static bool seq_equal(const std::vector<Value>& a, const std::vector<Value>& b) {
  if (a.size() != b.size()) return false;
  Nest n("comparing");
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].is_obj() && b[i].is_obj() && a[i].obj() == b[i].obj()) continue;  // the same object (a list holding itself)
    if (!values_equal(a[i], b[i])) return false;
  }
  return true;
}

bool values_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is(VT::Float) || b.is(VT::Float)) return a.to_double() == b.to_double();
    int64_t x = a.is(VT::Int) ? a.as_int() : a.as_bool(), y = b.is(VT::Int) ? b.as_int() : b.as_bool();
    return x == y;
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case VT::None: return true;
    case VT::DType: return a.as_int() == b.as_int();
    case VT::Ellipsis: return true;
    case VT::Str: return a.as<StrObj>()->s == b.as<StrObj>()->s;
    case VT::List: return seq_equal(a.as<ListObj>()->items, b.as<ListObj>()->items);
    case VT::Tuple: return seq_equal(a.as<TupleObj>()->items, b.as<TupleObj>()->items);
    case VT::Proxy: return a.as<ProxyObj>()->p == b.as<ProxyObj>()->p;
    case VT::Stmt: return a.as<StmtObj>()->stmt == b.as<StmtObj>()->stmt;
    case VT::Type: return a.as<TypeObj>()->type == b.as<TypeObj>()->type;
    case VT::Range: {
      auto *x = a.as<RangeObj>(), *y = b.as<RangeObj>();
      return x->start == y->start && x->stop == y->stop && x->step == y->step;
    }
    case VT::Dict: {
      auto *x = a.as<DictObj>(), *y = b.as<DictObj>();
      if (x == y) return true;
      if (x->size() != y->size()) return false;
      Nest n("comparing");
      for (auto& [k, v] : x->items()) {
        Value* w = y->find(k);
        if (!w) return false;
        if (v.is_obj() && w->is_obj() && v.obj() == w->obj()) continue;
        if (!values_equal(v, *w)) return false;
      }
      return true;
    }
    default: return a.obj() == b.obj();
  }
}

namespace {

size_t mix(size_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return h;
}

// Integers hash to themselves, as in Python: dense integer keys then fill neighbouring slots,
// and a loop over them walks the table in order (cache friendly); everything else is mixed.
// Collisions leave the neighbourhood at once (see next_slot), so a dense run of small keys does
// not become one cluster that every larger key landing in it must walk.
size_t key_hash(const Value& k) {
  if (k.is(VT::Int)) return static_cast<size_t>(k.as_int());
  if (k.is(VT::Bool)) return static_cast<size_t>(k.as_bool());
  if (k.is(VT::Float)) {
    double f = k.as_float();
    if (f == std::floor(f) && std::fabs(f) < 9e18) return static_cast<size_t>(static_cast<int64_t>(f));
  }
  return mix(ValueHash()(k));
}

bool same_key(const Value& a, const Value& b) {
  if (a.is(VT::Int) && b.is(VT::Int)) return a.as_int() == b.as_int();
  if (a.is(VT::Str) && b.is(VT::Str)) return a.as<StrObj>()->s == b.as<StrObj>()->s;
  return values_equal(a, b);
}

// The probe sequence, as CPython's: the hash's higher bits are shifted in, so keys that share
// their low bits part after one step; once perturb is 0, i -> 5i + 1 visits every slot of a
// power-of-two table. (Linear probing with identity-hashed integers walked 250 slots per probe on
// bench/lastuse.trace; this walks about 1.2.)
inline size_t next_slot(size_t i, size_t& perturb, size_t mask) {
  perturb >>= 5;
  return (i * 5 + perturb + 1) & mask;
}

}  // namespace

// The entry index of key k, or -1; *free_slot receives where to insert it (the first erased
// slot on the probe path, else the empty slot that ended it).
int64_t DictObj::probe(const Value& k, size_t h, int64_t* free_slot) const {
  size_t mask = table_.size() - 1, i = h & mask, perturb = h;
  int64_t first_free = -1;
  uint32_t tag = static_cast<uint32_t>(h ^ (h >> 32));
  while (true) {
    const Slot& slot = table_[i];
    int32_t t = slot.index;
    if (t == -1) {
      if (free_slot) *free_slot = first_free >= 0 ? first_free : static_cast<int64_t>(i);
      return -1;
    }
    if (t == -2) {
      if (first_free < 0) first_free = static_cast<int64_t>(i);
    } else if (slot.tag == tag && same_key(entries[static_cast<size_t>(t)].first, k)) {
      return t;
    }
    i = next_slot(i, perturb, mask);
  }
}

void DictObj::rebuild(size_t capacity) {
  table_.assign(capacity, Slot{-1, 0});
  used_ = 0;
  size_t mask = capacity - 1;
  for (size_t e = 0; e < entries.size(); ++e) {
    if (entries[e].first.is(VT::Unbound)) continue;
    size_t h = hashes_[e], i = h & mask, perturb = h;
    while (table_[i].index != -1) i = next_slot(i, perturb, mask);
    table_[i] = Slot{static_cast<int32_t>(e), static_cast<uint32_t>(h ^ (h >> 32))};
    ++used_;
  }
}

Value* DictObj::find(const Value& k) {
  if (table_.empty()) return nullptr;
  int64_t e = probe(k, key_hash(k), nullptr);
  return e < 0 ? nullptr : &entries[static_cast<size_t>(e)].second;
}

void DictObj::set(const Value& k, Value v) {
  size_t h = key_hash(k);
  if ((used_ + 1) * 4 > table_.size() * 3) {
    size_t live = size() + 1, cap = 8;
    while (cap * 3 < live * 4 + 4) cap *= 2;
    if (dead) compact();
    rebuild(cap);
  }
  int64_t slot = -1;
  int64_t e = probe(k, h, &slot);
  if (e >= 0) {
    entries[static_cast<size_t>(e)].second = std::move(v);
    return;
  }
  if (table_[static_cast<size_t>(slot)].index == -1) ++used_;
  table_[static_cast<size_t>(slot)] = Slot{static_cast<int32_t>(entries.size()), static_cast<uint32_t>(h ^ (h >> 32))};
  entries.emplace_back(k, std::move(v));
  hashes_.push_back(h);
}

bool DictObj::erase(const Value& k) {
  if (table_.empty()) return false;
  size_t h = key_hash(k), mask = table_.size() - 1, i = h & mask, perturb = h;
  while (table_[i].index != -1) {
    int32_t t = table_[i].index;
    if (t >= 0 && hashes_[static_cast<size_t>(t)] == h && same_key(entries[static_cast<size_t>(t)].first, k)) {
      table_[i].index = -2;
      entries[static_cast<size_t>(t)] = {Value::unbound(), Value()};
      if (++dead > 16 && dead * 2 > entries.size()) {
        compact();
        rebuild(table_.size());
      }
      return true;
    }
    i = next_slot(i, perturb, mask);
  }
  return false;
}

void DictObj::compact() {
  if (dead == 0) return;
  size_t w = 0;
  for (size_t r = 0; r < entries.size(); ++r) {
    if (entries[r].first.is(VT::Unbound)) continue;
    if (w != r) {
      entries[w] = std::move(entries[r]);
      hashes_[w] = hashes_[r];
    }
    ++w;
  }
  entries.resize(w);
  hashes_.resize(w);
  dead = 0;
}

std::vector<std::pair<Value, Value>>& DictObj::items() {
  if (dead) {
    compact();
    rebuild(table_.size());
  }
  return entries;
}

void DictObj::clear() {
  entries.clear();
  hashes_.clear();
  table_.clear();
  used_ = 0;
  dead = 0;
}

const Value* NamespaceObj::lookup(const std::string& k) const {
  for (const NamespaceObj* ns = this; ns; ns = ns->fallback) {
    auto it = ns->members.find(k);
    if (it != ns->members.end()) return &it->second;
    if (!ns->fallback_prefix.empty()) {
      if (k.size() <= ns->fallback_prefix.size() || k.compare(0, ns->fallback_prefix.size(), ns->fallback_prefix) != 0) return nullptr;
      return ns->fallback ? ns->fallback->lookup(k.substr(ns->fallback_prefix.size())) : nullptr;
    }
  }
  return nullptr;
}

int64_t RangeObj::size() const {
  // In 128 bits: start and stop may lie 2^64 apart. range() refuses ranges whose length does
  // not fit in 64 bits (range_size), so the result fits.
  return static_cast<int64_t>(range_size(start, stop, step));
}

__int128 range_size(int64_t start, int64_t stop, int64_t step) {
  const __int128 a = start, b = stop, s = step;
  if (s > 0) return b > a ? (b - a + s - 1) / s : 0;
  return a > b ? (a - b - s - 1) / (-s) : 0;
}

bool truthy(const Value& v) {
  switch (v.type()) {
    case VT::None: return false;
    case VT::Bool: return v.as_bool();
    case VT::Int: return v.as_int() != 0;
    case VT::Float: return v.as_float() != 0;
    case VT::Str: return !v.as<StrObj>()->s.empty();
    case VT::List: return !v.as<ListObj>()->items.empty();
    case VT::Tuple: return !v.as<TupleObj>()->items.empty();
    case VT::Dict: return v.as<DictObj>()->size() != 0;
    case VT::Range: return v.as<RangeObj>()->size() != 0;
    default: return true;
  }
}

static std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  std::string s = fmt::format("{}", d);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

namespace {
// The containers being printed: one met again inside itself prints as [...] or {...}, as in Python.
thread_local std::vector<const Object*> printing;
struct Printing {
  explicit Printing(const Object* o) { printing.push_back(o); }
  ~Printing() { printing.pop_back(); }
  static bool active(const Object* o) { return std::find(printing.begin(), printing.end(), o) != printing.end(); }
};
}  // namespace

static std::string seq_repr(const std::vector<Value>& xs, const char* open, const char* close, bool tuple) {
  Nest n("printing");
  std::string s = open;
  for (size_t i = 0; i < xs.size(); ++i) s += (i ? ", " : "") + repr(xs[i]);
  if (tuple && xs.size() == 1) s += ",";
  return s + close;
}

std::string repr(const Value& v) {
  switch (v.type()) {
    case VT::None: return "None";
    case VT::Bool: return v.as_bool() ? "True" : "False";
    case VT::Int: return std::to_string(v.as_int());
    case VT::Float: return float_repr(v.as_float());
    case VT::DType: return rt::dtype_name(v.as_dtype());
    case VT::Str: return ir::quote_str(v.as<StrObj>()->s);
    case VT::List: {
      if (Printing::active(v.obj())) return "[...]";
      Printing p(v.obj());
      return seq_repr(v.as<ListObj>()->items, "[", "]", false);
    }
    case VT::Tuple: {
      const TupleObj* t = v.as<TupleObj>();
      if (!t->names) return seq_repr(t->items, "(", ")", true);
      if (Printing::active(v.obj())) return t->names->type + "(...)";
      Printing p(v.obj());
      std::string s = t->names->type + "(";
      for (size_t i = 0; i < t->items.size(); ++i) s += (i ? ", " : "") + t->names->fields[i] + "=" + repr(t->items[i]);
      return s + ")";
    }
    case VT::Dict: {
      if (Printing::active(v.obj())) return "{...}";
      Printing p(v.obj());
      Nest n("printing");
      std::string s = "{";
      bool first = true;
      for (auto& [k, x] : v.as<DictObj>()->items()) {
        s += (first ? "" : ", ") + repr(k) + ": " + repr(x);
        first = false;
      }
      return s + "}";
    }
    case VT::Function: return "<function " + v.as<FunctionObj>()->info->name + ">";
    case VT::Builtin: return std::string("<built-in function ") + v.as<BuiltinObj>()->name() + ">";
    case VT::BoundMethod: return "<bound method>";
    case VT::Tensor: {
      const rt::Tensor& t = v.as<TensorObj>()->host();
      if (!t.defined()) return "<donated tensor>";
      return std::string("<tensor ") + rt::dtype_name(t.dtype()) + rt::shape_str(t.shape()) + ">";
    }
    case VT::Proxy: {
      const ir::Proxy& p = *v.as<ProxyObj>()->p;
      return "<proxy " + p.name + ": " + p.type.str() + ">";
    }
    case VT::Trace: return "<trace " + v.as<TraceObj>()->trace->name + ">";
    case VT::Type: {
      const ir::TensorType& t = v.as<TypeObj>()->type;
      std::string d = t.dist == ir::Dist::replicated ? ".replicated()"
                      : t.dist == ir::Dist::sharded  ? ".sharded(" + std::to_string(t.shard_dim) + ")"
                      : t.dist == ir::Dist::per_rank ? ".per_rank()"
                                                     : "";
      return std::string(rt::dtype_name(t.dtype)) + rt::shape_str(t.shape) + d;
    }
    case VT::Namespace: return "<module '" + v.as<NamespaceObj>()->name + "'>";
    case VT::Op: return "<op prims." + v.as<OpObj>()->op->name + ">";
    case VT::Range: {
      auto* r = v.as<RangeObj>();
      return "range(" + std::to_string(r->start) + ", " + std::to_string(r->stop) +
             (r->step != 1 ? ", " + std::to_string(r->step) : "") + ")";
    }
    case VT::Cell: return "<cell>";
    case VT::Region: return "<region " + v.as<RegionObj>()->name + ">";
    case VT::Stmt: return "<statement " + ir::print_stmt_line(*v.as<StmtObj>()->stmt) + ">";
    case VT::Recording: return "<recording into " + v.as<RecordingObj>()->trace->name + ">";
    case VT::Compiled: return "<compiled function " + v.as<CompiledObj>()->name + ">";
    case VT::Unbound: return "<unbound>";
    case VT::Ellipsis: return "Ellipsis";
    case VT::Slice: {
      auto* s = v.as<SliceObj>();
      return "slice(" + repr(s->lower) + ", " + repr(s->upper) + ", " + repr(s->step) + ")";
    }
  }
  return "<value>";
}

std::string float_to_int(double d, int64_t* out) {
  if (std::isnan(d)) return "cannot convert float NaN to integer";
  if (std::isinf(d)) return "cannot convert float infinity to integer";
  if (d < -9223372036854775808.0 || d >= 9223372036854775808.0)
    return "cannot convert float " + float_repr(d) + " to integer: it does not fit in 64 bits (tracer's integers are 64-bit)";
  *out = static_cast<int64_t>(d);
  return "";
}

std::string to_str(const Value& v) {
  if (v.is(VT::Str)) return v.as<StrObj>()->s;
  if (v.is(VT::Trace)) {
    std::string s = ir::print_trace(*v.as<TraceObj>()->trace);
    if (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
  }
  return repr(v);
}

}  // namespace tracer::interp
