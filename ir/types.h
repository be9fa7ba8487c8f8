// Tensor types and proxies: the symbolic values that traces are made of.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "runtime/dtype.h"

namespace tracer::ir {

using rt::DType;
using rt::Shape;

// How a tensor is spread over a job's ranks (docs/distributed.md, "Distribution in types"):
// not known (outside a job, or never declared), the same on every rank (replicated), this rank's
// slice along shard_dim of a tensor split over the ranks in rank order (sharded; the shape is the
// slice's), or different on each rank for another reason (per_rank: data parallelism's batches
// and activations).
enum class Dist : uint8_t { unknown, replicated, sharded, per_rank };

struct TensorType {
  DType dtype = DType::f32;
  Shape shape;
  std::string device = "cpu";
  // The pending result of an asynchronous collective (Thunder's "FUTURE cuda:0 f32[64]"): only
  // prims.wait reads it, and gives the tensor.
  bool future = false;
  Dist dist = Dist::unknown;
  int shard_dim = 0;  // sharded: the dimension split over the ranks
  size_t nbytes() const { return static_cast<size_t>(rt::numel(shape)) * rt::dtype_size(dtype); }
  // "cpu f32[2, 3]" (Thunder's type comment form), "FUTURE cpu f32[2, 3]" for a future, and the
  // distribution after the shape when known: "cpu f32[32, 64] sharded(0)", "... replicated",
  // "... per-rank".
  std::string str() const;
  // Same dtype, shape and futureness (devices may differ: a trace printed for cuda:0 runs on the CPU).
  bool same_layout(const TensorType& o) const { return dtype == o.dtype && shape == o.shape && future == o.future; }
  bool operator==(const TensorType& o) const {
    return same_layout(o) && device == o.device && dist == o.dist && (dist != Dist::sharded || shard_dim == o.shard_dim);
  }
  bool same_dist(const TensorType& o) const { return dist == o.dist && (dist != Dist::sharded || shard_dim == o.shard_dim); }
};

// Parses Thunder's "cuda:0 f32[2, 3]" or "f32[2, 3]" (device optional; "bool" and long dtype
// names accepted; a leading "FUTURE" makes a future). Returns nullopt with *why set on failure.
std::optional<TensorType> parse_type_string(const std::string& s, std::string* why);

struct ViewStep;
struct Storage;

struct Proxy {
  std::string name;
  TensorType type;
  bool auto_named = true;  // generated name ("t12"), may take a user's variable name once
  // The variable a program assigned it to where that name was taken already (a printout's t17
  // when a function it called generated t17 first): what runs call the value in their outputs.
  std::string user_name;
  // An input the caller hands over rather than holds (an element of a Thunder backward's
  // saved_for_backward or cotangents collection): once the trace's last reference goes (its
  // del, its collection's clear), its memory is free (ir/memory.h).
  bool moved_in = false;
  // Set when prims.copy_ wrote over this tensor (Thunder's in-place ops): a trace is functional,
  // so a later read would see the old value; every op refuses it, naming what wrote it.
  std::string written_over;
  // Aliases while a trace is recorded (Thunder's in-place ops through views: prims.copy_ into a
  // view, prims.update_aliases; docs/thunder.md, "In-place ops"). A view prim's output knows the
  // tensor it views and how; the tensor at the root of such a chain that was written through any
  // of its aliases holds the count of writes and its value after the last one.
  std::shared_ptr<const ViewStep> view;
  std::shared_ptr<Storage> storage;
};
using ProxyPtr = std::shared_ptr<Proxy>;

}  // namespace tracer::ir
