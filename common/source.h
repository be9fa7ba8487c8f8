// Source text kept for diagnostics: files, byte-offset locations, and clang-style rendering.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tracer {

// A place in source: file index into a SourceManager plus a byte range.
struct SourceLoc {
  int32_t file = -1;  // -1: no location
  uint32_t offset = 0;
  uint32_t length = 0;
  bool valid() const { return file >= 0; }
};

struct LineCol {
  int line = 0;  // 1-based
  int col = 0;   // 1-based, in bytes
};

class SourceManager {
 public:
  // Registers text under a display name; returns its file index.
  int32_t add(std::string name, std::string text);
  const std::string& name(int32_t file) const;
  const std::string& text(int32_t file) const;
  LineCol line_col(SourceLoc loc) const;
  // The whole line containing loc, without its newline.
  std::string line_text(SourceLoc loc) const;
  int32_t file_count() const { return static_cast<int32_t>(files_.size()); }

 private:
  struct File {
    std::string name, text;
    std::vector<uint32_t> line_starts;
  };
  std::vector<File> files_;
};

enum class Severity { error, warning, note };

struct Diagnostic {
  Severity severity = Severity::error;
  SourceLoc loc;
  std::string message;
  std::vector<Diagnostic> notes;
};

// Renders "file:line:col: error: message", the source line and a caret under the span.
std::string render(const SourceManager& sm, const Diagnostic& d);

// " (did you mean 'x'?)" for the candidate nearest to name by edit distance, when one is near
// enough to be a likely typo (at most a third of the name's letters, at least one), else "".
std::string did_you_mean(const std::string& name, const std::vector<std::string>& candidates);

// Collects diagnostics for one operation; the host decides how to show them.
class DiagnosticList {
 public:
  void add(Diagnostic d) { items_.push_back(std::move(d)); }
  void error(SourceLoc loc, std::string msg) { add({Severity::error, loc, std::move(msg), {}}); }
  bool has_errors() const;
  const std::vector<Diagnostic>& items() const { return items_; }
  std::string render_all(const SourceManager& sm) const;
  void clear() { items_.clear(); }

 private:
  std::vector<Diagnostic> items_;
};

// Thrown for errors in user input that carry a location (used inside the library only;
// API entry points turn it into diagnostics).
struct UserError {
  Diagnostic diag;
};

}  // namespace tracer
