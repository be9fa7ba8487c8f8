// The REPL (`tracer` with no arguments): docs/repl.md.
#pragma once
#include "tracer/session.h"

// Reads chunks from stdin until the end of input or :quit, running each in s. Interactive
// (prompts, line editing, history in $TRACER_HISTORY or ~/.tracer_history) when stdin and stdout
// are terminals; otherwise it reads lines plainly and prints no prompts. Returns the exit status.
int run_repl(tracer::Session& s);
