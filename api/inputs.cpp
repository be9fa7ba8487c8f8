// Random inputs for parameters that were not given a file.
#include "api/inputs.h"

#include "runtime/kernels.h"

namespace tracer::api {

rt::Tensor random_input(rt::DType dt, const rt::Shape& shape, uint64_t seed, uint64_t index, rt::Allocator* al) {
  uint64_t offset = (uint64_t{1} << 32) + index;
  if (rt::is_float(dt)) return rt::uniform_philox(shape, -1.0, 1.0, dt, seed, offset, al);
  if (rt::is_bool(dt)) {
    rt::Tensor u = rt::uniform_philox(shape, 0.0, 1.0, rt::DType::f32, seed, offset, al);
    rt::Scalar half;
    half.value = 0.5;
    return rt::binary(rt::BinaryOp::lt, u, half, rt::DType::f32, rt::DType::b8, al);
  }
  rt::Tensor u = rt::uniform_philox(shape, 0.0, 16.0, rt::DType::f32, seed, offset, al);
  return rt::cast(u, dt, al);
}

}  // namespace tracer::api
