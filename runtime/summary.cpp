// Tensor summaries for printing results.
#include "runtime/summary.h"

#include <fmt/format.h>

namespace tracer::rt {

static std::string value_str(const Tensor& t, int64_t i) {
  double v = t.get(i);
  if (is_bool(t.dtype())) return v != 0 ? "True" : "False";
  if (!is_float(t.dtype())) return fmt::format("{}", static_cast<int64_t>(v));
  return fmt::format("{:.6g}", v);
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
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += t.get(i);
  return out + "] sum=" + fmt::format("{:.8g}", sum);
}

}  // namespace tracer::rt
