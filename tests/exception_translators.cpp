// How tracer's own exception types print when one escapes a test of tracer_tests (without these,
// Catch2 reports "Unknown exception" and the script's message is lost).
#include <catch2/catch.hpp>

#include <string>

#include "common/source.h"
#include "interpreter/interp.h"
#include "interpreter/passes.h"
#include "ir/verify.h"

CATCH_TRANSLATE_EXCEPTION(const tracer::interp::ScriptError& e) { return "script error: " + e.message; }
CATCH_TRANSLATE_EXCEPTION(const tracer::interp::PassError& e) { return "pass error: " + e.diag.message; }
CATCH_TRANSLATE_EXCEPTION(const tracer::UserError& e) { return "user error: " + e.diag.message; }
CATCH_TRANSLATE_EXCEPTION(const tracer::ir::VerifyError& e) { return "verify error: " + e.message + (e.stmt.empty() ? "" : " at " + e.stmt); }
CATCH_TRANSLATE_EXCEPTION(const tracer::ir::ExecError& e) { return "exec error: " + e.message + (e.stmt.empty() ? "" : " at " + e.stmt); }
