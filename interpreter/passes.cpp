// The pass manager.
#include "interpreter/passes.h"

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "ir/verify.h"

namespace tracer::interp {

namespace {

Diagnostic pass_error(const std::string& pass, const std::string& msg, SourceLoc loc = {}) {
  return Diagnostic{Severity::error, loc, "pass '" + pass + "': " + msg, {}};
}

// A pass option's value: a Python literal, else the word itself as a string.
Value option_value(const std::string& v) {
  if (v == "True") return Value::boolean(true);
  if (v == "False") return Value::boolean(false);
  if (v == "None") return Value();
  if (v.size() >= 2 && (v.front() == '\'' || v.front() == '"') && v.back() == v.front()) return str_value(v.substr(1, v.size() - 2));
  char* end = nullptr;
  long long i = std::strtoll(v.c_str(), &end, 10);
  if (!v.empty() && end && *end == '\0') return Value::integer(i);
  double f = std::strtod(v.c_str(), &end);
  if (!v.empty() && end && *end == '\0') return Value::number(f);
  return str_value(v);
}

Traces call_pass(Interpreter& in, const PassSpec& spec, const Value& fn, const Traces& traces) {
  const std::string& name = spec.name;
  std::vector<Value> xs;
  for (const auto& t : traces) xs.push_back(make<TraceObj>(std::make_shared<ir::Trace>(*t)));
  CallArgs args;
  args.pos.push_back(make<ListObj>(std::move(xs)));
  for (const auto& [k, v] : spec.options) args.kw.emplace_back(k, option_value(v));
  Value r;
  try {
    r = in.call(fn, std::move(args), {});
  } catch (const ScriptError& e) {
    Diagnostic d = in.diagnose(e);
    d.message = "pass '" + name + "' failed: " + d.message;
    throw PassError{d};
  }
  Traces out;
  if (r.is(VT::List) || r.is(VT::Tuple)) {
    for (const Value& v : in.iterate(r, {})) {
      if (!v.is(VT::Trace)) throw PassError{pass_error(name, std::string("returned a list holding a ") + type_name(v.type()) + ", expected traces")};
      out.push_back(v.as<TraceObj>()->trace);
    }
  } else if (r.is(VT::Trace)) {
    out.push_back(r.as<TraceObj>()->trace);
  } else {
    throw PassError{pass_error(name, std::string("returned a ") + type_name(r.type()) + ", expected a list of traces")};
  }
  if (out.empty() || out.size() > 2) throw PassError{pass_error(name, "must return one or two traces, returned " + std::to_string(out.size()))};
  return out;
}

void verify_all(const std::string& name, const Traces& ts) {
  for (const auto& t : ts) {
    auto errs = ir::verify(*t);
    if (errs.empty()) continue;
    const ir::VerifyError& e = errs.front();
    Diagnostic d = pass_error(name, "broke trace '" + t->name + "': " + e.message + (e.stmt.empty() ? "" : " (in: " + e.stmt + ")"), e.loc);
    for (size_t i = 1; i < errs.size() && i < 5; ++i) d.notes.push_back({Severity::note, errs[i].loc, errs[i].message, {}});
    throw PassError{d};
  }
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\n"), e = s.find_last_not_of(" \t\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return true;
}

}  // namespace

std::vector<std::string> split_pass_list(const std::string& list) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  char quote = 0;
  for (char c : list + ",") {
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '(') {
      ++depth;
    } else if (c == ')') {
      --depth;
    } else if (c == ',' && depth <= 0) {
      std::string t = trim(cur);
      if (!t.empty()) out.push_back(t);
      cur.clear();
      continue;
    }
    cur += c;
  }
  std::string t = trim(cur.substr(0, cur.empty() ? 0 : cur.size() - 1));
  if (!t.empty()) out.push_back(t);
  return out;
}

std::string parse_pass_spec(const std::string& text, PassSpec* out) {
  std::string s = trim(text);
  size_t open = s.find('(');
  out->name = trim(s.substr(0, open));
  out->options.clear();
  if (!is_identifier(out->name)) return "'" + s + "' is not a pass name (a name, or name(key=value, ...))";
  if (open == std::string::npos) return "";
  if (s.back() != ')') return "'" + s + "': the options end with ')'";
  std::string body = s.substr(open + 1, s.size() - open - 2);
  for (const std::string& kv : split_pass_list(body)) {
    size_t eq = kv.find('=');
    std::string k = trim(kv.substr(0, eq));
    if (eq == std::string::npos || !is_identifier(k) || trim(kv.substr(eq + 1)).empty())
      return "'" + s + "': option '" + kv + "' is not key=value";
    for (const auto& o : out->options)
      if (o.first == k) return "'" + s + "': option '" + k + "' is given twice";
    out->options.emplace_back(k, trim(kv.substr(eq + 1)));
  }
  return "";
}

std::string pass_order_error(const std::vector<std::string>& entries) {
  std::vector<std::string> names;
  for (const std::string& e : entries) {
    PassSpec spec;
    parse_pass_spec(e, &spec);
    names.push_back(spec.name);
  }
  struct Rule {
    const char* first;
    const char* then;
    const char* why;
  };
  static const Rule kRules[] = {
      {"grad", "remat", "remat works on the forward and backward traces grad makes"},
      {"grad", "checkpoint", "checkpoint works on the forward and backward traces grad makes"},
      {"grad", "del_last_used", "del_last_used deletes values as they die, and grad reads them all"},
      {"checkpoint", "del_last_used", "del_last_used deletes values as they die, and checkpoint recomputes from them"},
      {"remat", "del_last_used", "del_last_used deletes values as they die, and remat moves their uses"},
  };
  auto first_at = [&](const char* n) -> long {
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == n) return static_cast<long>(i);
    return -1;
  };
  auto last_at = [&](const char* n) -> long {
    for (size_t i = names.size(); i-- > 0;)
      if (names[i] == n) return static_cast<long>(i);
    return -1;
  };
  for (const Rule& r : kRules) {
    long then = first_at(r.then), first = last_at(r.first);
    if (then >= 0 && first > then)
      return "pass order: '" + std::string(r.first) + "' must run before '" + r.then + "' (" + r.why + "); got " + [&] {
        std::string l;
        for (const auto& n : entries) l += (l.empty() ? "" : ",") + n;
        return l;
      }();
  }
  return "";
}

Traces run_passes(Interpreter& in, const Traces& traces, const std::vector<std::string>& entries,
                  const PassOptions& opts, std::vector<PassTiming>* timings) {
  std::string order = pass_order_error(entries);
  if (!order.empty()) throw PassError{Diagnostic{Severity::error, {}, order, {}}};
  Traces cur = traces;
  for (const std::string& entry : entries) {
    PassSpec spec;
    std::string bad = parse_pass_spec(entry, &spec);
    if (!bad.empty()) throw PassError{Diagnostic{Severity::error, {}, bad, {}}};
    const std::string& name = spec.name;
    const Value* fn = in.find_pass(name);
    if (!fn) throw PassError{pass_error(name, "no such pass")};
    auto t0 = std::chrono::steady_clock::now();
    Traces next = call_pass(in, spec, *fn, cur);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (opts.verify) verify_all(name, next);
    char buf[64];
    std::snprintf(buf, sizeof buf, " (took %.0f milliseconds)", ms);
    for (auto& t : next) t->provenance.push_back("Constructed by " + trim(entry) + buf);
    if (timings) timings->push_back({trim(entry), ms});
    bool print = false;
    for (const auto& p : opts.print_after) print = print || p == name || p == "all";
    if (print && opts.on_print_after) opts.on_print_after(name, next);
    cur = std::move(next);
  }
  return cur;
}

std::string print_traces(const Traces& traces) {
  std::string out;
  for (size_t i = 0; i < traces.size(); ++i) {
    if (i) out += std::string(56, '*') + "\n";
    out += ir::print_trace(*traces[i]);
  }
  return out;
}

}  // namespace tracer::interp
