// The pass manager.
#include "interpreter/passes.h"

#include <chrono>
#include <cstdio>

#include "ir/verify.h"

namespace tracer::interp {

namespace {

Diagnostic pass_error(const std::string& pass, const std::string& msg, SourceLoc loc = {}) {
  return Diagnostic{Severity::error, loc, "pass '" + pass + "': " + msg, {}};
}

Traces call_pass(Interpreter& in, const std::string& name, const Value& fn, const Traces& traces) {
  std::vector<Value> xs;
  for (const auto& t : traces) xs.push_back(make<TraceObj>(std::make_shared<ir::Trace>(*t)));
  CallArgs args;
  args.pos.push_back(make<ListObj>(std::move(xs)));
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

}  // namespace

std::string pass_order_error(const std::vector<std::string>& names) {
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
        for (const auto& n : names) l += (l.empty() ? "" : ",") + n;
        return l;
      }();
  }
  return "";
}

Traces run_passes(Interpreter& in, const Traces& traces, const std::vector<std::string>& names,
                  const PassOptions& opts, std::vector<PassTiming>* timings) {
  std::string order = pass_order_error(names);
  if (!order.empty()) throw PassError{Diagnostic{Severity::error, {}, order, {}}};
  Traces cur = traces;
  for (const std::string& name : names) {
    const Value* fn = in.find_pass(name);
    if (!fn) throw PassError{pass_error(name, "no such pass")};
    auto t0 = std::chrono::steady_clock::now();
    Traces next = call_pass(in, name, *fn, cur);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (opts.verify) verify_all(name, next);
    char buf[64];
    std::snprintf(buf, sizeof buf, " (took %.0f milliseconds)", ms);
    for (auto& t : next) t->provenance.push_back("Constructed by " + name + buf);
    if (timings) timings->push_back({name, ms});
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
