// The standard library written in the trace language, embedded in the binary at build time.
#pragma once
#include <vector>

namespace tracer::stdlib {

struct File {
  const char* module;  // "ltorch"
  const char* path;    // source path, for diagnostics
  const char* text;
};

const std::vector<File>& files();

}  // namespace tracer::stdlib
