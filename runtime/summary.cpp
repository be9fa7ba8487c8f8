// Tensor summaries for printing results.
#include "runtime/summary.h"

#include <fmt/format.h>

namespace tracer::rt {

// An integer element exactly (i64 values near 2^63 do not survive a double).
static int64_t int_at(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::i64: return t.data_as<int64_t>()[i];
    case DType::i32: return t.data_as<int32_t>()[i];
    case DType::i8: return t.data_as<int8_t>()[i];
    case DType::u8: return t.data_as<uint8_t>()[i];
    default: return t.data_as<uint8_t>()[i] != 0;  // b8
  }
}

static std::string value_str(const Tensor& t, int64_t i) {
  if (is_bool(t.dtype())) return int_at(t, i) != 0 ? "True" : "False";
  if (!is_float(t.dtype())) return fmt::format("{}", int_at(t, i));
  return fmt::format("{:.6g}", t.get(i));
}

std::string summarize(const Tensor& t, int max_values) {
  std::string out = std::string(dtype_name(t.dtype())) + shape_str(t.shape()) + " [";
  int64_t n = t.numel();
  int64_t head = n <= max_values ? n : max_values / 2;
  for (int64_t i = 0; i < head; ++i) out += (i ? ", " : "") + value_str(t, i);
  if (n > max_values) {
    out += ", ...";
    for (int64_t i = n - (max_values - head); i < n; ++i) out += ", " + value_str(t, i);
  }
  if (!is_float(t.dtype())) {  // integers sum exactly (in 128 bits: no wrap)
    __int128 sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += int_at(t, i);
    bool neg = sum < 0;
    unsigned __int128 m = neg ? -static_cast<unsigned __int128>(sum) : static_cast<unsigned __int128>(sum);
    std::string digits;
    do {
      digits.insert(digits.begin(), static_cast<char>('0' + static_cast<int>(m % 10)));
      m /= 10;
    } while (m);
    return out + "] sum=" + (neg ? "-" : "") + digits;
  }
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += t.get(i);
  return out + "] sum=" + fmt::format("{:.8g}", sum);
}

}  // namespace tracer::rt
