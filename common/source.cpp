// Line tables and clang-style rendering of diagnostics.
#include "common/source.h"

#include <algorithm>

namespace tracer {

int32_t SourceManager::add(std::string name, std::string text) {
  File f{std::move(name), std::move(text), {0}};
  for (uint32_t i = 0; i < f.text.size(); ++i)
    if (f.text[i] == '\n') f.line_starts.push_back(i + 1);
  files_.push_back(std::move(f));
  return static_cast<int32_t>(files_.size() - 1);
}

const std::string& SourceManager::name(int32_t file) const { return files_.at(file).name; }
const std::string& SourceManager::text(int32_t file) const { return files_.at(file).text; }

LineCol SourceManager::line_col(SourceLoc loc) const {
  if (!loc.valid() || loc.file >= file_count()) return {};
  const auto& starts = files_[loc.file].line_starts;
  auto it = std::upper_bound(starts.begin(), starts.end(), loc.offset);
  int line = static_cast<int>(it - starts.begin());
  return {line, static_cast<int>(loc.offset - starts[line - 1]) + 1};
}

std::string SourceManager::line_text(SourceLoc loc) const {
  if (!loc.valid() || loc.file >= file_count()) return {};
  const File& f = files_[loc.file];
  LineCol lc = line_col(loc);
  uint32_t start = f.line_starts[lc.line - 1];
  size_t end = f.text.find('\n', start);
  if (end == std::string::npos) end = f.text.size();
  std::string s = f.text.substr(start, end - start);
  if (!s.empty() && s.back() == '\r') s.pop_back();
  return s;
}

static const char* severity_name(Severity s) {
  switch (s) {
    case Severity::error: return "error";
    case Severity::warning: return "warning";
    case Severity::note: return "note";
  }
  return "error";
}

static void render_one(const SourceManager& sm, const Diagnostic& d, std::string& out) {
  if (d.loc.valid() && d.loc.file < sm.file_count()) {
    LineCol lc = sm.line_col(d.loc);
    out += sm.name(d.loc.file) + ":" + std::to_string(lc.line) + ":" + std::to_string(lc.col) + ": ";
    out += std::string(severity_name(d.severity)) + ": " + d.message + "\n";
    std::string line = sm.line_text(d.loc);
    out += line + "\n";
    std::string caret;
    for (int i = 1; i < lc.col && i - 1 < static_cast<int>(line.size()); ++i)
      caret += line[i - 1] == '\t' ? '\t' : ' ';
    caret += '^';
    size_t avail = line.size() >= static_cast<size_t>(lc.col) ? line.size() - lc.col : 0;
    size_t tildes = d.loc.length > 1 ? std::min<size_t>(d.loc.length - 1, avail) : 0;
    caret.append(tildes, '~');
    out += caret + "\n";
  } else {
    out += std::string(severity_name(d.severity)) + ": " + d.message + "\n";
  }
  for (const auto& n : d.notes) render_one(sm, n, out);
}

std::string render(const SourceManager& sm, const Diagnostic& d) {
  std::string out;
  render_one(sm, d, out);
  return out;
}

bool DiagnosticList::has_errors() const {
  return std::any_of(items_.begin(), items_.end(),
                     [](const Diagnostic& d) { return d.severity == Severity::error; });
}

std::string DiagnosticList::render_all(const SourceManager& sm) const {
  std::string out;
  for (const auto& d : items_) out += render(sm, d);
  return out;
}

std::string did_you_mean(const std::string& name, const std::vector<std::string>& candidates) {
  // Edits to turn a into b: insertions, deletions, substitutions and swaps of neighbours ("gard").
  auto distance = [](const std::string& a, const std::string& b) {
    std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
    for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
    for (size_t i = 1; i <= a.size(); ++i)
      for (size_t j = 1; j <= b.size(); ++j) {
        d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
        if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    return d[a.size()][b.size()];
  };
  const size_t most = std::max<size_t>(1, name.size() / 3);
  std::string best;
  size_t best_d = most + 1;
  for (const std::string& c : candidates) {
    size_t d = distance(name, c);
    if (d < best_d && c != name) {
      best_d = d;
      best = c;
    }
  }
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

}  // namespace tracer
