// Script values: immediates (None, bool, int, float, dtype) and refcounted heap objects.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "interpreter/ast.h"
#include "ir/op.h"
#include "ir/trace.h"
#include "runtime/cuda.h"
#include "runtime/tensor.h"

namespace tracer::interp {

enum class VT : uint8_t {
  None, Bool, Int, Float, DType, Unbound, Ellipsis,  // immediates (Unbound: a deleted local)
  Str, List, Tuple, Dict, Function, Builtin, BoundMethod,
  Tensor, Proxy, Trace, Type, Namespace, Op, Range, Cell, Region, Slice, Stmt, Recording, Compiled,
};

const char* type_name(VT t);

// Frees an object whose last reference went: nested containers are freed one after another
// instead of recursively, so that a value nested a million deep does not overflow the stack.
struct Object;
void release_object(Object* o);

struct Object {
  int32_t refs = 0;
  VT type;
  explicit Object(VT t) : type(t) {}
  virtual ~Object() = default;
};

class Value {
 public:
  Value() : t_(VT::None) { u_.i = 0; }
  static Value boolean(bool b) { Value v; v.t_ = VT::Bool; v.u_.b = b; return v; }
  static Value integer(int64_t i) { Value v; v.t_ = VT::Int; v.u_.i = i; return v; }
  static Value number(double f) { Value v; v.t_ = VT::Float; v.u_.f = f; return v; }
  static Value dtype(rt::DType d) { Value v; v.t_ = VT::DType; v.u_.i = static_cast<int64_t>(d); return v; }
  static Value unbound() { Value v; v.t_ = VT::Unbound; return v; }
  static Value ellipsis() { Value v; v.t_ = VT::Ellipsis; return v; }
  explicit Value(Object* o) : t_(o->type) { u_.o = o; ++o->refs; }
  Value(const Value& o) : t_(o.t_), u_(o.u_) { if (is_obj()) ++u_.o->refs; }
  Value(Value&& o) noexcept : t_(o.t_), u_(o.u_) { o.t_ = VT::None; }
  Value& operator=(const Value& o) { Value tmp(o); swap(tmp); return *this; }
  Value& operator=(Value&& o) noexcept { Value tmp(std::move(o)); swap(tmp); return *this; }
  ~Value() { if (is_obj() && --u_.o->refs == 0) release_object(u_.o); }
  void swap(Value& o) noexcept { std::swap(t_, o.t_); std::swap(u_, o.u_); }

  VT type() const { return t_; }
  bool is(VT t) const { return t_ == t; }
  bool is_obj() const { return t_ >= VT::Str; }
  bool is_none() const { return t_ == VT::None; }
  bool as_bool() const { return u_.b; }
  int64_t as_int() const { return u_.i; }
  double as_float() const { return u_.f; }
  rt::DType as_dtype() const { return static_cast<rt::DType>(u_.i); }
  Object* obj() const { return u_.o; }
  template <class T> T* as() const { return static_cast<T*>(u_.o); }
  bool is_number() const { return t_ == VT::Int || t_ == VT::Float || t_ == VT::Bool; }
  double to_double() const { return t_ == VT::Float ? u_.f : t_ == VT::Int ? double(u_.i) : double(u_.b); }
  bool is_tensorish() const { return t_ == VT::Tensor || t_ == VT::Proxy; }

 private:
  VT t_;
  union {
    bool b;
    int64_t i;
    double f;
    Object* o;
  } u_;
};

struct StrObj : Object {
  std::string s;
  explicit StrObj(std::string v) : Object(VT::Str), s(std::move(v)) {}
};
// Lists, tuples and dicts are registered while they live, in the heap of the interpreter that
// made them, so that reference cycles among them (a list that holds itself) can be found and
// freed: ContainerHeap::collect_cycles.
class ContainerHeap;
struct Container : Object {
  explicit Container(VT t);
  ~Container() override;
  Container(const Container&) = delete;
  Container& operator=(const Container&) = delete;
  ContainerHeap* heap = nullptr;  // none when made outside every HeapScope (never collected)
  Container* gc_prev = nullptr;
  Container* gc_next = nullptr;
};
// The containers of one interpreter. Each interpreter has its own, so that one interpreter's
// collection never looks at another's objects, which another thread may be changing.
class ContainerHeap {
 public:
  ContainerHeap() = default;
  ~ContainerHeap();  // containers that outlive it stay alive, in no heap
  ContainerHeap(const ContainerHeap&) = delete;
  ContainerHeap& operator=(const ContainerHeap&) = delete;
  // Frees the containers of this heap that only cycles among themselves keep alive (CPython's
  // trial deletion, over containers only: one referred to from anything else stays). Returns
  // how many were freed. The interpreter runs it when it is destroyed.
  size_t collect_cycles();
  size_t size();

 private:
  friend struct Container;
  std::mutex mutex_;
  Container* head_ = nullptr;
};
// Containers made on this thread while it lives join `heap` (the interpreter's entry points
// open one); the previous heap is restored when it ends.
class HeapScope {
 public:
  explicit HeapScope(ContainerHeap& heap);
  ~HeapScope();
  HeapScope(const HeapScope&) = delete;
  HeapScope& operator=(const HeapScope&) = delete;

 private:
  ContainerHeap* prev_;
};

struct ListObj : Container {
  std::vector<Value> items;
  explicit ListObj(std::vector<Value> v = {}) : Container(VT::List), items(std::move(v)) {}
};
// A named tuple's type (namedtuple(), torch.return_types): its name and its fields' names.
struct TupleNames {
  std::string type;
  std::vector<std::string> fields;
};
struct TupleObj : Container {
  std::vector<Value> items;
  std::shared_ptr<const TupleNames> names;  // a named tuple's fields (items[i] is fields[i]); else null
  explicit TupleObj(std::vector<Value> v = {}, std::shared_ptr<const TupleNames> n = nullptr)
      : Container(VT::Tuple), items(std::move(v)), names(std::move(n)) {}
};

struct ValueHash { size_t operator()(const Value& v) const; };
struct ValueEq { bool operator()(const Value& a, const Value& b) const; };

struct DictObj : Container {
  // Insertion order. An erased entry leaves a tombstone (an Unbound key) until the next
  // iteration or until tombstones are half the vector, so erasing is O(1) amortized.
  std::vector<std::pair<Value, Value>> entries;
  size_t dead = 0;
  DictObj() : Container(VT::Dict) {}
  Value* find(const Value& k);
  void set(const Value& k, Value v);
  bool erase(const Value& k);
  void clear();
  size_t size() const { return entries.size() - dead; }
  // The live entries in insertion order (compacts first).
  std::vector<std::pair<Value, Value>>& items();

 private:
  // Open addressing over entry indices (-1 empty, -2 erased); the table's size is a power of two.
  // A slot holds an entry index and 32 bits of the key's hash, so a probe rejects other keys
  // without touching the entries.
  struct Slot {
    int32_t index;
    uint32_t tag;
  };
  std::vector<Slot> table_;
  std::vector<size_t> hashes_;  // parallel to entries
  size_t used_ = 0;             // table slots that are not empty (erased ones included)
  int64_t probe(const Value& k, size_t h, int64_t* free_slot) const;
  void rebuild(size_t capacity);
  void compact();
};

// Per-function facts computed by the resolver.
struct FuncInfo {
  std::string name;
  int32_t nslots = 0;
  std::vector<int32_t> param_slots;        // parallel to the params
  std::vector<int32_t> cell_slots;         // slots holding cells (captured by inner functions)
  // For each free variable of this function: where the enclosing function keeps its cell
  // (is_free = true: the enclosing function's own closure index; else its local slot).
  std::vector<std::pair<bool, int32_t>> free_sources;
  const std::vector<ast::Param>* params = nullptr;
  const ast::Block* body = nullptr;       // FunctionDef
  const ast::Expr* lambda_body = nullptr; // Lambda
  SourceLoc loc;
};

struct Module;

struct CellObj : Object {
  Value v;
  CellObj() : Object(VT::Cell) {}
};

// Functions are registered with their interpreter so that, when it is destroyed, it can break
// the reference cycles closures make (a recursive inner function holds the cell that holds it).
using FunctionRegistry = std::unordered_map<const void*, struct FunctionObj*>;

struct FunctionObj : Object {
  FunctionRegistry* registry = nullptr;
  const FuncInfo* info = nullptr;
  std::shared_ptr<Module> module;
  std::vector<Value> defaults;     // parallel to params (None where there is no default)
  std::vector<Value> annotations;  // parallel to params (None where absent)
  std::vector<Value> closure;      // cells
  bool composite = false;          // a stdlib op: recorded as one statement with subsymbols
  std::string qualname;            // "ltorch.linear"
  explicit FunctionObj(FunctionRegistry* r = nullptr) : Object(VT::Function), registry(r) {
    if (registry) (*registry)[this] = this;
  }
  ~FunctionObj() override {
    if (registry) registry->erase(this);
  }
};

class Interpreter;
// Positional arguments: up to four live inline (no allocation for the common call), more in a
// vector. Contiguous either way, so begin()/end() are pointers.
class ArgList {
 public:
  static constexpr size_t kInline = 4;
  ArgList() = default;
  ArgList(std::initializer_list<Value> xs) { *this = xs; }
  ArgList(ArgList&& o) noexcept { take(std::move(o)); }
  ArgList& operator=(ArgList&& o) noexcept {
    if (this != &o) {
      clear();
      take(std::move(o));
    }
    return *this;
  }
  ArgList(const ArgList& o) { for (const Value& v : o) push_back(v); }
  ArgList& operator=(const ArgList& o) {
    if (this != &o) {
      clear();
      for (const Value& v : o) push_back(v);
    }
    return *this;
  }
  ArgList& operator=(std::initializer_list<Value> xs) {
    clear();
    reserve(xs.size());
    for (const Value& v : xs) push_back(v);
    return *this;
  }
  ArgList& operator=(std::vector<Value>&& xs) {
    clear();
    if (xs.size() > kInline) {
      heap_vec_ = std::move(xs);
      heap_ = true;
    } else {
      for (Value& v : xs) push_back(std::move(v));
    }
    return *this;
  }
  size_t size() const { return heap_ ? heap_vec_.size() : n_; }
  bool empty() const { return size() == 0; }
  Value* begin() { return heap_ ? heap_vec_.data() : inline_; }
  Value* end() { return begin() + size(); }
  const Value* begin() const { return heap_ ? heap_vec_.data() : inline_; }
  const Value* end() const { return begin() + size(); }
  Value& operator[](size_t i) { return begin()[i]; }
  const Value& operator[](size_t i) const { return begin()[i]; }
  Value& at(size_t i) {
    if (i >= size()) throw std::out_of_range("argument index");
    return begin()[i];
  }
  const Value& at(size_t i) const {
    if (i >= size()) throw std::out_of_range("argument index");
    return begin()[i];
  }
  Value& back() { return begin()[size() - 1]; }
  void reserve(size_t n) {
    if (n > kInline) spill(n);
  }
  void push_back(Value v) {
    if (!heap_ && n_ < kInline) {
      inline_[n_++] = std::move(v);
      return;
    }
    spill(size() + 1);
    heap_vec_.push_back(std::move(v));
  }
  // Inserts v before position `at` (a pointer from begin()).
  void insert(Value* at, Value v) {
    size_t k = static_cast<size_t>(at - begin());
    push_back(Value());
    Value* b = begin();
    for (size_t i = size() - 1; i > k; --i) b[i] = std::move(b[i - 1]);
    b[k] = std::move(v);
  }
  void clear() {
    for (size_t i = 0; i < n_; ++i) inline_[i] = Value();
    n_ = 0;
    heap_vec_.clear();
    heap_ = false;
  }

 private:
  void spill(size_t n) {
    if (!heap_) {
      heap_vec_.reserve(std::max(n, 2 * kInline));
      for (size_t i = 0; i < n_; ++i) heap_vec_.push_back(std::move(inline_[i]));
      n_ = 0;
      heap_ = true;
    } else {
      heap_vec_.reserve(n);
    }
  }
  void take(ArgList&& o) {
    heap_ = o.heap_;
    heap_vec_ = std::move(o.heap_vec_);
    n_ = o.n_;
    for (size_t i = 0; i < n_; ++i) inline_[i] = std::move(o.inline_[i]);
    o.n_ = 0;
    o.heap_ = false;
    o.heap_vec_.clear();
  }
  Value inline_[kInline];
  size_t n_ = 0;
  bool heap_ = false;
  std::vector<Value> heap_vec_;
};

struct CallArgs {
  ArgList pos;
  std::vector<std::pair<std::string, Value>> kw;
};
using BuiltinFn = Value (*)(Interpreter& in, CallArgs& args, SourceLoc loc);

struct BuiltinDef {
  const char* name;
  BuiltinFn fn;
  const char* doc;
};

// A function of the host's, registered through the embedding API: a closure, with its own name
// and documentation.
struct NativeDef {
  std::string name, signature, doc;
  std::function<Value(Interpreter& in, CallArgs& args, SourceLoc loc)> fn;
};

struct BuiltinObj : Object {
  const BuiltinDef* def = nullptr;       // tracer's own builtins
  std::shared_ptr<const NativeDef> native;  // or the host's
  explicit BuiltinObj(const BuiltinDef* d) : Object(VT::Builtin), def(d) {}
  explicit BuiltinObj(std::shared_ptr<const NativeDef> n) : Object(VT::Builtin), native(std::move(n)) {}
  const char* name() const { return native ? native->name.c_str() : def->name; }
};

// obj.method: calling it passes self first.
struct BoundMethodObj : Object {
  Value self, fn;
  BoundMethodObj(Value s, Value f) : Object(VT::BoundMethod), self(std::move(s)), fn(std::move(f)) {}
};

class DeviceBackend;
struct TensorObj : Object {
  // On the host: t. On a device (a device program's result): dev, with the backend that made it,
  // and t empty until host() copies it over (kept: tensors are values, never changed in place).
  // Neither: donated to a compiled call.
  rt::Tensor t;
  std::shared_ptr<rt::cuda::DeviceTensor> dev;
  DeviceBackend* backend = nullptr;
  explicit TensorObj(rt::Tensor v) : Object(VT::Tensor), t(std::move(v)) {}
  TensorObj(rt::cuda::DeviceTensor d, DeviceBackend* b)
      : Object(VT::Tensor), dev(std::make_shared<rt::cuda::DeviceTensor>(std::move(d))), backend(b) {}
  bool holds_value() const { return t.defined() || dev; }
  bool on_device() const { return dev != nullptr; }
  rt::DType dtype() const { return dev ? dev->dtype : t.dtype(); }
  const rt::Shape& shape() const { return dev ? dev->shape : t.shape(); }
  std::string device() const;  // "cpu", "cuda:0"
  // The values on the host (copied from the device the first time; throws if that fails).
  const rt::Tensor& host(rt::Allocator* al = nullptr);
  void clear() {
    t = rt::Tensor();
    dev.reset();
  }
};
struct ProxyObj : Object {
  ir::ProxyPtr p;
  explicit ProxyObj(ir::ProxyPtr v) : Object(VT::Proxy), p(std::move(v)) {}
};
struct TraceObj : Object {
  std::shared_ptr<ir::Trace> trace;
  explicit TraceObj(std::shared_ptr<ir::Trace> t) : Object(VT::Trace), trace(std::move(t)) {}
};
// A tensor type written as an annotation: f32[2, 3].
struct TypeObj : Object {
  ir::TensorType type;
  explicit TypeObj(ir::TensorType t) : Object(VT::Type), type(std::move(t)) {}
};
struct NamespaceObj : Object {
  std::string name;
  std::unordered_map<std::string, Value> members;
  const NamespaceObj* fallback = nullptr;  // looked up when a member is missing
  // With a prefix: a missing member named prefix + k is the fallback's k (only those).
  std::string fallback_prefix;
  // torch.ops.aten: each member is an overload packet (ATen's X.default, X.Tensor, X.dim_IntList
  // are X: tracer's ops take every overload's arguments).
  bool overload_packets = false;
  explicit NamespaceObj(std::string n) : Object(VT::Namespace), name(std::move(n)) {}
  const Value* lookup(const std::string& k) const;
};
struct OpObj : Object {
  const ir::OpDecl* op;
  explicit OpObj(const ir::OpDecl* o) : Object(VT::Op), op(o) {}
};
struct RangeObj : Object {
  int64_t start, stop, step;
  RangeObj(int64_t a, int64_t b, int64_t s) : Object(VT::Range), start(a), stop(b), step(s) {}
  int64_t size() const;
};
// A region marker for "with checkpoint():".
struct RegionObj : Object {
  std::string name;
  int id = 0;  // 0: a new region; else the region of an existing statement (passes re-enter it)
  explicit RegionObj(std::string n, int i = 0) : Object(VT::Region), name(std::move(n)), id(i) {}
};

struct SliceObj : Object {
  Value lower, upper, step;
  SliceObj(Value a, Value b, Value c) : Object(VT::Slice), lower(std::move(a)), upper(std::move(b)), step(std::move(c)) {}
};

// A statement of a trace, as scripts see it (read-only).
struct StmtObj : Object {
  std::shared_ptr<const ir::Stmt> stmt;
  explicit StmtObj(std::shared_ptr<const ir::Stmt> s) : Object(VT::Stmt), stmt(std::move(s)) {}
};
// "with recording(t):" records the ops called in its body into trace t.
struct RecordingObj : Object {
  std::shared_ptr<ir::Trace> trace;
  explicit RecordingObj(std::shared_ptr<ir::Trace> t) : Object(VT::Recording), trace(std::move(t)) {}
};

template <class T, class... A>
Value make(A&&... a) { return Value(new T(std::forward<A>(a)...)); }
inline Value str_value(std::string s) { return make<StrObj>(std::move(s)); }

bool truthy(const Value& v);  // throws for tensors (caller reports)
std::string repr(const Value& v);
std::string to_str(const Value& v);
bool values_equal(const Value& a, const Value& b);
// The integer a float stands for (truncated), or why it has none: "" when it is finite and fits
// in 64 bits (tracer's integers are 64-bit: no big integers), else a message.
std::string float_to_int(double d, int64_t* out);
// The number of elements of range(start, stop, step), step != 0 (more than 2^63 - 1 possible).
__int128 range_size(int64_t start, int64_t stop, int64_t step);

}  // namespace tracer::interp
