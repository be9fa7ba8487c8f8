// Element types, their sizes and names, PyTorch's type promotion, and f16/bf16 conversion.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tracer::rt {

enum class DType : uint8_t { f64, f32, f16, bf16, i64, i32, i8, u8, b8 };
constexpr int kDTypeCount = 9;

size_t dtype_size(DType t);
// Short name as printed in traces: "f64", "f32", "f16", "bf16", "i64", "i32", "i8", "u8", "b8".
const char* dtype_name(DType t);
// Accepts short names, Thunder/PyTorch long names ("float32", "bfloat16", "int64", "bool", "float",
// "half", "double", "long", "int") and "bool8".
std::optional<DType> dtype_from_name(const std::string& name);
bool is_float(DType t);
bool is_int(DType t);   // integral, excluding bool
bool is_bool(DType t);

// PyTorch promotion between two tensors (same category: larger wins; f16+bf16 -> f32;
// int+float -> float; bool is lowest). Scalars participate by category only:
// promote_with_scalar(t, kind) returns t unless the scalar's category is higher
// (then f32 for a float scalar over an int/bool tensor, i64 for an int scalar over bool).
DType promote(DType a, DType b);
enum class ScalarKind { Bool, Int, Float };
DType promote_with_scalar(DType t, ScalarKind k);

using Shape = std::vector<int64_t>;
int64_t numel(const Shape& s);
std::string shape_str(const Shape& s);  // "[2, 3]"
// NumPy broadcasting of two shapes; nullopt when incompatible.
std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b);

// bf16 and f16 conversions (round to nearest even; NaN preserved).
uint16_t float_to_bf16(float f);
float bf16_to_float(uint16_t h);
uint16_t float_to_half(float f);
float half_to_float(uint16_t h);

}  // namespace tracer::rt
