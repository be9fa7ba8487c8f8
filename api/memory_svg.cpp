// The memory chart of `tracer mem --plot`: a plain SVG line chart, no dependencies.
#include <fmt/format.h>

#include <algorithm>

#include "tracer/session.h"

namespace tracer {

namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

std::string gib(size_t b) { return fmt::format("{:.2f} GiB", static_cast<double>(b) / (1024.0 * 1024 * 1024)); }

// A "nice" axis step (1, 2 or 5 times a power of ten) giving about five ticks.
double nice_step(double range) {
  double raw = range / 5, p = 1;
  while (p * 10 <= raw) p *= 10;
  while (p > raw) p /= 10;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (p * m >= raw) return p * m;
  return p * 10;
}

}  // namespace

std::string memory_svg(const MemoryReport& r, const std::string& title) {
  const double W = 960, H = 420, L = 80, R = 20, T = 50, B = 60;
  const double pw = W - L - R, ph = H - T - B;
  size_t n = std::max<size_t>(r.timeline.size(), 1);
  double ymax_gib = std::max(1e-9, static_cast<double>(r.peak_bytes) / (1024.0 * 1024 * 1024) * 1.1);
  double step = nice_step(ymax_gib);
  auto x = [&](size_t i) { return L + pw * (n <= 1 ? 0.5 : static_cast<double>(i) / static_cast<double>(n - 1)); };
  auto y = [&](double gb) { return T + ph * (1 - gb / ymax_gib); };
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{}\" y=\"24\" font-size=\"16\" font-weight=\"bold\">{}</text>\n",
      W, H, L, escape(title));
  for (double v = 0; v <= ymax_gib + 1e-12; v += step) {
    s += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>\n", L, y(v), W - R, y(v));
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:.3g} GiB</text>\n", L - 6, y(v) + 4, v);
  }
  // Phase boundaries and labels.
  for (size_t ph_i = 0; ph_i < r.traces.size(); ++ph_i) {
    size_t first = n, last = 0;
    for (size_t i = 0; i < r.timeline.size(); ++i)
      if (r.timeline[i].trace == static_cast<int>(ph_i)) {
        first = std::min(first, i);
        last = i;
      }
    if (first == n) continue;
    if (ph_i > 0)
      s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#888\" stroke-dasharray=\"4 3\"/>\n",
                       x(first), T, T + ph);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\" fill=\"#555\">{} ({} statements)</text>\n",
                     (x(first) + x(last)) / 2, T + ph + 20, escape(r.traces[ph_i]), last - first + 1);
  }
  std::string pts;
  for (size_t i = 0; i < r.timeline.size(); ++i)
    pts += fmt::format("{:.1f},{:.1f} ", x(i), y(static_cast<double>(r.timeline[i].live_bytes) / (1024.0 * 1024 * 1024)));
  s += "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\" points=\"" + pts + "\"/>\n";
  // The peak: the timeline point of the peak statement.
  size_t pk = 0;
  for (size_t i = 0; i < r.timeline.size(); ++i)
    if (r.timeline[i].trace == static_cast<int>(std::find(r.traces.begin(), r.traces.end(), r.peak_trace) - r.traces.begin()) &&
        r.timeline[i].index == r.peak_index)
      pk = i;
  double px = x(pk), py = y(static_cast<double>(r.peak_bytes) / (1024.0 * 1024 * 1024));
  s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"5\" fill=\"#d62728\"/>\n", px, py);
  s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"{}\" fill=\"#d62728\">peak {} in {}</text>\n", px,
                   py - 10, px > L + pw * 0.7 ? "end" : "start", gib(r.peak_bytes), escape(r.peak_trace));
  s += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"#555\">inputs held throughout: {}; saved for backward: {}</text>\n", L,
                   H - 12, gib(r.input_bytes), gib(r.saved_for_backward_bytes));
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\" fill=\"#555\">statements</text>\n", W - R, T + ph + 36);
  return s + "</svg>\n";
}

}  // namespace tracer
