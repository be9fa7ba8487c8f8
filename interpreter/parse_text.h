// Text helpers of the parser front end that need no ANTLR: literal decoding, Thunder comment
// forms, columns. Private to interpreter/parse_*.cpp and parser.cpp.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace tracer::parse {

// Decodes a string literal token (prefix, quotes, escapes). Returns false and sets err on a
// malformed escape; out still holds a best-effort value.
bool decode_string(std::string_view token, std::string& out, std::string& err);
// True for a long ("""...""" or '''...''') literal missing its closing quotes.
bool is_unterminated_long_string(std::string_view token);

// Number literals: "0x1f", "1_000", "0b101", "0o17", "1.5e-3", ".5", "1.".
bool is_float_literal(std::string_view text);
bool parse_int_literal(std::string_view text, int64_t& out);  // false on overflow
double parse_float_literal(std::string_view text);

// "# t0: \"cuda:0 f32[2, 3]\"" -> name "t0", type "cuda:0 f32[2, 3]". body is the text after '#'.
bool match_type_comment(std::string_view body, std::string& name, std::string& type);
// Names Thunder gives fusion regions: nvFusion0, fusion3, TorchCompile1, ...
bool is_fusion_name(std::string_view name);

std::string_view trim(std::string_view s);
// Display column (0-based, tabs to multiples of 8) of offset within its line of text.
size_t column_of(std::string_view text, size_t offset);
// True when only blanks precede offset on its line.
bool starts_line(std::string_view text, size_t offset);
// A short, printable rendering of the character at offset, for "invalid character" messages.
std::string describe_char(std::string_view text, size_t offset);

}  // namespace tracer::parse
