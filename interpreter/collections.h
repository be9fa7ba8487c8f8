// Thunder's collection parameters: a backward printout's `saved_for_backward` and `cotangents`.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/source.h"
#include "interpreter/value.h"
#include "ir/types.h"

namespace tracer::interp {

class Interpreter;

// A collection parameter as the function's body unpacks it (`C0, _, = saved_for_backward`, then
// `t1, t2, = C0`): a tree whose leaves are tensors named by their unpacking targets, numbers
// and Nones (an unused `_`).
struct Collection {
  enum class Kind { Tensor, Number, None, Tuple } kind = Kind::None;
  std::string name;    // Tensor, Number: the target it is unpacked into
  ir::TensorType type; // Tensor
  Value number;        // Number
  std::vector<Collection> items;  // Tuple
};

// An element that nothing types: collected so that one error names them all (fail_untyped).
struct UntypedElement {
  SourceLoc loc;
  std::string name, collection, forward;
  bool backward = false;  // of a backward's saved_for_backward or cotangents (a forward may type it)
  std::string use;        // its first use, which does not determine its type ("an embedding's table, line 18")
};

// The collection parameter `index` of `fn`, or nullopt when the body never unpacks it. Each
// tensor's type comes from, in order: `given` (inputs from files, --type), a type comment in the
// body (`# t1: "cuda:0 f32[2, 2]"`, as Thunder prints it after an unpacking), or the forward trace
// in the same file (`augmented_forward_fn`, whose return states what is saved: its second item
// is `saved_for_backward`, its `flat_output` the values whose cotangents come in). A tensor none
// of them types is appended to `untyped` (its leaf stays a Tensor of no type).
std::optional<Collection> collection_param(Interpreter& in, const FunctionObj& fn, size_t index,
                                           const std::map<std::string, ir::TensorType>& given,
                                           std::vector<UntypedElement>* untyped);

// What a Thunder prologue reads from its module (`obj.get_parameter('0.weight')`, get_buffer):
// the keys in the order the body first reads them.
struct ModuleRead {
  std::string key;
  bool buffer = false;
  SourceLoc loc;
};

// The tensors a prologue reads from the module it was traced for (`globals()['__function_obj']`,
// then `obj.get_parameter(KEY)` or get_buffer), typed as collection elements are (given, the
// statement's annotation, a type comment); nullopt when the body reads none. `reads` gets one
// entry an element.
std::optional<Collection> module_collection(Interpreter& in, const FunctionObj& fn,
                                            const std::map<std::string, ir::TensorType>& given,
                                            std::vector<UntypedElement>* untyped, std::vector<ModuleRead>* reads);

// A printout's DTensor input: `name` declared "DTensor cuda:0 f32[16, 16]" (by a type comment,
// an annotated statement or its parameter's annotation): that global type, else nullopt.
std::optional<ir::TensorType> dtensor_declared(const FunctionObj& fn, const std::string& name);

// The type of a DTensor input's local tensor: where the body unwraps it
// (`t: "cuda:0 f32[8, 16]" = get_dtensor_inner_tensor(name)`, or `name._local_tensor`), typed
// by that statement's annotation or type comment; fails naming the input when nothing does.
ir::TensorType dtensor_local_type(Interpreter& in, const FunctionObj& fn, const std::string& name,
                                  const ir::TensorType& global, SourceLoc loc);

// A printout's value for an input that is not a tensor: "int 8", "float 0.5", "bool True",
// "str sum" (a 2023 printout's `# "sum"`), "None"; nullopt for anything else (a tensor's type).
std::optional<Value> literal_of_type_string(const std::string& ts);

// Fails, at the first, with an error that names every untyped element; nothing when none.
void fail_untyped(Interpreter& in, const FunctionObj& fn, const std::vector<UntypedElement>& untyped);

// The tensor leaves of a collection, depth first.
void collection_tensors(const Collection& c, std::vector<const Collection*>* out);

}  // namespace tracer::interp
