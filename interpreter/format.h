// String formatting as Python does it: the format-spec mini-language of str.format and format()
// ([[fill]align][sign][#][0][width][,|_][.precision][type], types d n x X o b c e E f F g G % s)
// and printf-style `%` formatting (%[(key)][flags][width][.precision]type, flags - + space 0 #,
// width and precision `*`, types d i u x X o e E f F g G c s r a %). What Python refuses
// (a float with `d`, a sign on a string, an argument left over) is refused with Python's words:
// a std::invalid_argument the caller reports at its location.
#pragma once
#include <string>
#include <vector>

#include "interpreter/value.h"

namespace tracer::interp {

// format(v, spec): v formatted by one format spec (the part after ':' in a str.format field).
std::string format_spec(const Value& v, const std::string& spec);

// fmt % args: args is the right operand (a tuple gives the values in order; a dict is read by
// the %(key) of each conversion; anything else is the one value).
std::string percent_format(const std::string& fmt, const Value& args);

}  // namespace tracer::interp
