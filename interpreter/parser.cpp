// parse_module: the parser front end's entry point. Runs the ANTLR grammar (grammar/Tracer.g4)
// over a registered file and builds the AST; ANTLR types stay inside interpreter/parse_*.
#include "interpreter/parser.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "interpreter/parse_builder.h"
#include "interpreter/parse_session.h"
#include "interpreter/parse_text.h"

namespace tracer::parse {

namespace {

// The generated parser shares its prediction caches (DFA) between instances; parsing is
// serialized so that several interpreters in one process can parse safely.
std::mutex& antlr_cache_mutex() {
  static std::mutex m;
  return m;
}

}  // namespace

std::unique_ptr<ast::Module> parse_module(const SourceManager& sm, int32_t file, DiagnosticList& diags) {
  auto module = std::make_unique<ast::Module>();
  module->file = file;
  std::vector<Diagnostic> errors;
  try {
    std::lock_guard<std::mutex> lock(antlr_cache_mutex());
    OffsetMap identity;
    identity.add(0, 0);
    Session session(sm.text(file), std::move(identity), file, errors);
    TracerParser::File_inputContext* tree = session.parse();
    Builder builder(session, /*detect_fusions=*/true);
    module->body = builder.build_file(tree, &module->header_comments);
    session.finish();
  } catch (const std::exception& e) {
    errors.push_back({Severity::error, SourceLoc{file, 0, 0},
                      std::string("internal parser error: ") + e.what() + " (please report this)", {}});
  }
  std::stable_sort(errors.begin(), errors.end(),
                   [](const Diagnostic& a, const Diagnostic& b) { return a.loc.offset < b.loc.offset; });
  for (auto& d : errors) diags.add(std::move(d));
  return module;
}

std::unique_ptr<ast::Module> parse_module_once(const SourceManager& sm, int32_t file, const void* key,
                                               DiagnosticList& diags) {
  static std::mutex mutex;
  static std::map<const void*, std::unique_ptr<ast::Module>> parsed;  // entries are never changed or removed
  const ast::Module* found = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = parsed.find(key);
    if (it == parsed.end()) {
      SourceManager own;
      int32_t f = own.add(sm.name(file), sm.text(file));
      DiagnosticList errors;
      auto m = parse_module(own, f, errors);
      if (!errors.items().empty()) return parse_module(sm, file, diags);
      it = parsed.emplace(key, std::move(m)).first;
    }
    found = it->second.get();
  }
  return ast::clone(*found, file);
}

std::string unknown_name_hint(const std::string& n) {
  if (is_fusion_name(n))
    return ": a fusion printed without its commented subsymbols (Thunder prints them under the call; without them "
           "nothing says what it computes)";
  // TransformerEngine's operators compute in FP8 with scaling state the printout does not hold.
  static const char* kFp8[] = {"te_linear_", "te_functional_linear", "get_te_fp8_", "te_fp8_", "te_sync_fp8",
                               "te_get_recipe", "te_functional_fwd", "te_functional_bwd"};
  for (const char* p : kFp8)
    if (n.rfind(p, 0) == 0)
      return ": an operator of Thunder's TransformerEngine executor, which tracer does not run: it computes in FP8 "
             "with scaling state (amax histories, recipes) that the printout does not hold, and tracer has no FP8 "
             "types; trace the model without the transformer_engine executor";
  static const char* kPrefixes[] = {"torch_", "sdpaex_", "sdpafx_", "cudnn_", "apex_", "triton_", "te_",
                                    "nvfuser_", "transformer_engine_", "flash_", "liger_", "cutlass_",
                                    "fa3_", "nvmath_", "unsloth_"};
  bool executor = n.size() > 5 && n.compare(n.size() - 5, 5, "_impl") == 0;
  for (const char* p : kPrefixes) executor = executor || n.rfind(p, 0) == 0;
  if (!executor) return "";
  return ": an operator of a Thunder executor that tracer does not know; add it to the executors' table in "
         "stdlib/thunder.trace or stdlib/executors.trace (one function over tracer's ops) or define it in a file given with --ops, or print the trace "
         "with its decomposition";
}

}  // namespace tracer::parse
