// The pass manager: runs passes (functions written in the language, from stdlib/passes or the
// user's files) over a program's traces, verifying, timing and recording provenance.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "interpreter/interp.h"

namespace tracer::interp {

using Traces = std::vector<std::shared_ptr<ir::Trace>>;

struct PassOptions {
  bool verify = true;                      // run the IR verifier after every pass
  std::vector<std::string> print_after;    // pass names, or "all"
  std::function<void(const std::string& pass, const Traces&)> on_print_after;
};

struct PassTiming {
  std::string name;
  double ms = 0;
};

// Thrown when a pass fails; the traces given to run_passes are left as they were.
struct PassError {
  Diagnostic diag;
};

// One entry of a pass list: "name" or "name(key=value, ...)". The values are Python literals
// (integers, floats, True, False, None, quoted strings) or bare words (strings), given to the
// pass as keyword arguments: `fsdp(zero=3, prefetch=2)` calls fsdp(traces, zero=3, prefetch=2).
struct PassSpec {
  std::string name;
  std::vector<std::pair<std::string, std::string>> options;  // key, the value's text
};

// Parses one entry; returns "" or what is wrong with it.
std::string parse_pass_spec(const std::string& text, PassSpec* out);

// Splits "grad, fsdp(zero=3, prefetch=2), del_last_used" at the commas outside parentheses,
// trimming each entry and dropping empty ones.
std::vector<std::string> split_pass_list(const std::string& list);

// The standard passes' order rules, checked before anything runs: grad before remat and
// checkpoint (they work on the forward and backward pair grad makes), and grad, checkpoint and
// remat before del_last_used (which deletes values as they die: a pass after it that reads them
// finds them gone). Returns "" or the first rule the list breaks, naming both passes.
std::string pass_order_error(const std::vector<std::string>& names);

// Applies the passes (entries of a pass list: names with optional options) in order (refusing an order pass_order_error refuses). A pass is called with a list of traces ([forward] or
// [forward, backward]) and must return such a list.
Traces run_passes(Interpreter& in, const Traces& traces, const std::vector<std::string>& names,
                  const PassOptions& opts, std::vector<PassTiming>* timings);

// Thunder's separator between the traces of one printout.
std::string print_traces(const Traces& traces);

}  // namespace tracer::interp
