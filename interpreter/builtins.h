// Builtin functions, methods of builtin types, and helpers shared by them.
#pragma once
#include <string>
#include <vector>

#include "interpreter/value.h"

namespace tracer::interp {

std::vector<const BuiltinDef*> builtin_defs();
// time.* and dist.* (installed into their namespaces: interpreter/namespaces.cpp).
std::vector<const BuiltinDef*> time_builtin_defs();
std::vector<const BuiltinDef*> dist_builtin_defs();
// _alias_path, _alias_written, _alias_update, _written_over (interpreter/aliases.cpp).
std::vector<const BuiltinDef*> alias_builtin_defs();
// An error unless a call has lo to hi positional arguments.
void want_args(Interpreter& in, const CallArgs& a, const char* name, size_t lo, size_t hi, SourceLoc loc);
// Methods of str, list and dict (for :help).
std::vector<std::pair<const char*, const BuiltinDef*>> method_defs();
Value math_namespace();
// The method `name` of a str, list, tuple or dict, or null.
const BuiltinDef* find_method(VT t, const std::string& name);
// load(path, like=None) and save(path, value) (interpreter/files.cpp).
Value builtin_load(Interpreter& in, CallArgs& a, SourceLoc loc);
Value builtin_save(Interpreter& in, CallArgs& a, SourceLoc loc);
Value builtin_load_module(Interpreter& in, CallArgs& a, SourceLoc loc);
// The value of a one-element concrete tensor as a Python number (int, float or bool by its
// dtype); `what` names the caller in errors (a proxy's value is not known while tracing).
Value tensor_item(Interpreter& in, const Value& v, SourceLoc loc, const char* what);
rt::Shape tensor_shape(const Value& v);
rt::DType tensor_dtype(const Value& v);
// What print() shows: strings as they are, tensors as a summary of their values.
std::string display(const Value& v);
// A new empty namespace object; the namespace a value holds (it must hold one).
inline Value new_namespace(const std::string& name) { return make<NamespaceObj>(name); }
inline NamespaceObj& namespace_ref(const Value& v) { return *v.as<NamespaceObj>(); }

}  // namespace tracer::interp
