// Tensor types and proxies: the symbolic values that traces are made of.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "runtime/dtype.h"

namespace tracer::ir {

using rt::DType;
using rt::Shape;

struct TensorType {
  DType dtype = DType::f32;
  Shape shape;
  std::string device = "cpu";
  // The pending result of an asynchronous collective (Thunder's "FUTURE cuda:0 f32[64]"): only
  // prims.wait reads it, and gives the tensor.
  bool future = false;
  size_t nbytes() const { return static_cast<size_t>(rt::numel(shape)) * rt::dtype_size(dtype); }
  // "cpu f32[2, 3]" (Thunder's type comment form), "FUTURE cpu f32[2, 3]" for a future.
  std::string str() const;
  // Same dtype, shape and futureness (devices may differ: a trace printed for cuda:0 runs on the CPU).
  bool same_layout(const TensorType& o) const { return dtype == o.dtype && shape == o.shape && future == o.future; }
  bool operator==(const TensorType& o) const { return same_layout(o) && device == o.device; }
};

// Parses Thunder's "cuda:0 f32[2, 3]" or "f32[2, 3]" (device optional; "bool" and long dtype
// names accepted; a leading "FUTURE" makes a future). Returns nullopt with *why set on failure.
std::optional<TensorType> parse_type_string(const std::string& s, std::string* why);

struct Proxy {
  std::string name;
  TensorType type;
  bool auto_named = true;  // generated name ("t12"), may take a user's variable name once
};
using ProxyPtr = std::shared_ptr<Proxy>;

}  // namespace tracer::ir
