// load and save: tensors and pytrees of them as .npy and .safetensors files, below the
// directories the host allows (Interpreter::allow_read / allow_write; tracer run --allow-read DIR
// --allow-write DIR). Without a grant, a script touches no file.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "interpreter/builtins.h"
#include "interpreter/interp.h"
#include "runtime/io.h"

namespace tracer::interp {

namespace fs = std::filesystem;

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The path, made absolute and normal, when it lies below one of dirs; else "" and *why.
std::string permitted(const std::string& path, const std::vector<std::string>& dirs, const char* what, std::string* why) {
  if (dirs.empty()) {
    const std::string verb = std::string(what) == "reading" ? "read" : "write";
    *why = std::string(what) + " '" + path + "' is not allowed: the host grants no " + verb + " access (tracer run --allow-" +
           verb + " DIR)";
    return "";
  }
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec) {
    *why = std::string("cannot resolve '") + path + "': " + ec.message();
    return "";
  }
  for (const std::string& d : dirs) {
    auto rel = p.lexically_relative(d);
    if (!rel.empty() && *rel.begin() != ".." && rel.is_relative()) return p.string();
  }
  std::string list;
  for (const std::string& d : dirs) list += (list.empty() ? "" : ", ") + d;
  *why = std::string(what) + " '" + path + "' is not allowed: it is not below " + (dirs.size() == 1 ? "the directory" : "the directories") +
         " the host allows (" + list + ")";
  return "";
}

// A pytree's leaves by dotted path ("layers.0.w"): tensors, and numbers as 0-d tensors.
void flatten_tree(Interpreter& in, const Value& v, const std::string& path, std::map<std::string, rt::Tensor>* out,
                  SourceLoc loc, int depth = 0) {
  if (depth > 64) in.fail(loc, "save: the value nests deeper than 64 levels");
  auto name = [&](const std::string& k) { return path.empty() ? k : path + "." + k; };
  // Keys may hold dots (PyTorch's state_dict names, "h.0.attn.w"): the file's names are the same
  // either way, so only two leaves that come to one name are refused.
  auto put = [&](const std::string& key, const rt::Tensor& t) {
    if (!out->emplace(key, t).second)
      in.fail(loc, "save: two values are named '" + key + "' in the file (a key with a '.' names the same as nested dicts)");
  };
  switch (v.type()) {
    case VT::Tensor: {
      const rt::Tensor& t = v.as<TensorObj>()->host();
      if (!t.defined()) in.fail(loc, "save: '" + path + "' is a tensor that was donated to a compiled call and holds no value");
      put(path.empty() ? "tensor" : path, t);
      return;
    }
    case VT::Int:
    case VT::Float:
    case VT::Bool: {
      rt::DType dt = v.is(VT::Int) ? rt::DType::i64 : v.is(VT::Float) ? rt::DType::f64 : rt::DType::b8;
      rt::Tensor t = rt::Tensor::empty(dt, {}, &in.allocator());
      if (v.is(VT::Int)) t.data_as<int64_t>()[0] = v.as_int();
      else t.set(0, v.to_double());
      put(path.empty() ? "value" : path, t);
      return;
    }
    case VT::None: return;
    case VT::List:
    case VT::Tuple: {
      const auto& xs = v.is(VT::List) ? v.as<ListObj>()->items : v.as<TupleObj>()->items;
      for (size_t i = 0; i < xs.size(); ++i) flatten_tree(in, xs[i], name(std::to_string(i)), out, loc, depth + 1);
      return;
    }
    case VT::Dict:
      for (auto& [k, x] : v.as<DictObj>()->items()) {
        if (!k.is(VT::Str) && !k.is(VT::Int)) in.fail(loc, "save: a dict key is a " + std::string(type_name(k.type())) + "; keys are strings or integers");
        std::string ks = k.is(VT::Str) ? k.as<StrObj>()->s : std::to_string(k.as_int());
        flatten_tree(in, x, name(ks), out, loc, depth + 1);
      }
      return;
    default:
      in.fail(loc, "save: '" + path + "' is a " + type_name(v.type()) + "; a file holds tensors and numbers, in lists, tuples and dicts");
  }
}

// `like` rebuilt from the file's tensors: every leaf must be there with its dtype and shape.
Value unflatten_tree(Interpreter& in, const Value& like, const std::string& path, std::map<std::string, rt::Tensor>& file,
                     std::set<std::string>* used, const std::string& fname, SourceLoc loc) {
  auto name = [&](const std::string& k) { return path.empty() ? k : path + "." + k; };
  auto take = [&](const std::string& key) -> rt::Tensor& {
    auto it = file.find(key);
    if (it == file.end()) {
      std::vector<std::string> names;
      for (const auto& [k, t] : file) names.push_back(k);
      in.fail(loc, "load: '" + fname + "' has no tensor '" + key + "'" + did_you_mean(key, names) +
                       " (it holds " + std::to_string(file.size()) + "; the structure given by like= names it)");
    }
    used->insert(key);
    return it->second;
  };
  switch (like.type()) {
    case VT::Tensor: {
      const std::string key = path.empty() ? "tensor" : path;
      rt::Tensor& t = take(key);
      const rt::Tensor& want = like.as<TensorObj>()->host();
      if (want.defined() && (want.dtype() != t.dtype() || want.shape() != t.shape()))
        in.fail(loc, "load: '" + fname + "' holds '" + key + "' as " + rt::dtype_name(t.dtype()) + rt::shape_str(t.shape()) +
                         " but the parameter is " + rt::dtype_name(want.dtype()) + rt::shape_str(want.shape()));
      return make<TensorObj>(t);
    }
    case VT::Int:
    case VT::Float:
    case VT::Bool: {
      const std::string key = path.empty() ? "value" : path;
      rt::Tensor& t = take(key);
      if (t.numel() != 1) in.fail(loc, "load: '" + fname + "' holds '" + key + "' with " + std::to_string(t.numel()) + " elements, not a number");
      if (like.is(VT::Int)) return Value::integer(t.dtype() == rt::DType::i64 ? t.data_as<int64_t>()[0] : static_cast<int64_t>(t.get(0)));
      if (like.is(VT::Bool)) return Value::boolean(t.get(0) != 0);
      return Value::number(t.get(0));
    }
    case VT::List:
    case VT::Tuple: {
      const auto& xs = like.is(VT::List) ? like.as<ListObj>()->items : like.as<TupleObj>()->items;
      std::vector<Value> ys;
      for (size_t i = 0; i < xs.size(); ++i) ys.push_back(unflatten_tree(in, xs[i], name(std::to_string(i)), file, used, fname, loc));
      return like.is(VT::List) ? make<ListObj>(std::move(ys)) : make<TupleObj>(std::move(ys));
    }
    case VT::Dict: {
      auto* d = new DictObj();
      Value out(d);
      for (auto& [k, x] : like.as<DictObj>()->items()) {
        std::string ks = k.is(VT::Str) ? k.as<StrObj>()->s : std::to_string(k.as_int());
        d->set(k, unflatten_tree(in, x, name(ks), file, used, fname, loc));
      }
      return out;
    }
    default: return like;
  }
}

const Value* kwarg(const CallArgs& a, const char* name) {
  for (const auto& [k, v] : a.kw)
    if (k == name) return &v;
  return nullptr;
}

}  // namespace

void Interpreter::allow_read(const std::string& dir) { allowed_read_.push_back(fs::weakly_canonical(fs::absolute(dir)).string()); }
void Interpreter::allow_write(const std::string& dir) { allowed_write_.push_back(fs::weakly_canonical(fs::absolute(dir)).string()); }

Value builtin_save(Interpreter& in, CallArgs& a, SourceLoc loc) {
  if (a.pos.size() != 2 || !a.kw.empty()) in.fail(loc, "save(path, value) takes a path and a tensor or a pytree of tensors");
  if (!a.pos[0].is(VT::Str)) in.fail(loc, "save(path, value): path must be a string, got " + repr(a.pos[0]));
  const std::string path = a.pos[0].as<StrObj>()->s;
  std::string why;
  std::string full = permitted(path, in.allowed_write(), "writing", &why);
  if (full.empty()) in.fail(loc, "save: " + why);
  try {
    if (a.pos[1].is(VT::Str)) {  // text (a plot, a log): any file name
      std::string err;
      if (!rt::write_file_atomically(full, a.pos[1].as<StrObj>()->s, &err)) in.fail(loc, "save: " + err);
      return Value();
    }
    if (ends_with(path, ".npy")) {
      if (!a.pos[1].is(VT::Tensor)) in.fail(loc, "save: a .npy file holds one tensor; save a pytree as .safetensors");
      const rt::Tensor& t = a.pos[1].as<TensorObj>()->host();
      if (!t.defined()) in.fail(loc, "save: the tensor was donated to a compiled call and holds no value");
      rt::write_npy(full, t);
    } else if (ends_with(path, ".safetensors")) {
      std::map<std::string, rt::Tensor> ts;
      flatten_tree(in, a.pos[1], "", &ts, loc);
      rt::write_safetensors(full, ts);
    } else {
      in.fail(loc, "save: '" + path + "' names neither a .npy nor a .safetensors file");
    }
  } catch (const std::runtime_error& e) {
    in.fail(loc, std::string("save: ") + e.what());
  }
  return Value();
}

Value builtin_load(Interpreter& in, CallArgs& a, SourceLoc loc) {
  if (a.pos.size() != 1) in.fail(loc, "load(path, like=None) takes a path");
  for (const auto& [k, v] : a.kw)
    if (k != "like") in.fail(loc, "load() got an unexpected keyword argument '" + k + "' (its option: like)");
  if (!a.pos[0].is(VT::Str)) in.fail(loc, "load(path): path must be a string, got " + repr(a.pos[0]));
  if (in.tracing()) in.fail(loc, "load() reads a file, which a traced function cannot do; load outside and pass the tensors in");
  const std::string path = a.pos[0].as<StrObj>()->s;
  std::string why;
  std::string full = permitted(path, in.allowed_read(), "reading", &why);
  if (full.empty()) in.fail(loc, "load: " + why);
  const Value* like = kwarg(a, "like");
  try {
    if (ends_with(path, ".npy")) {
      rt::Tensor t = rt::read_npy(full, &in.allocator());
      if (like && !like->is_none()) {
        std::map<std::string, rt::Tensor> one{{"tensor", t}};
        std::set<std::string> used;
        return unflatten_tree(in, *like, "", one, &used, path, loc);
      }
      return make<TensorObj>(std::move(t));
    }
    if (!ends_with(path, ".safetensors")) in.fail(loc, "load: '" + path + "' names neither a .npy nor a .safetensors file");
    std::map<std::string, rt::Tensor> file = rt::read_safetensors(full, &in.allocator());
    if (!like || like->is_none()) {
      auto* d = new DictObj();
      Value out(d);
      for (auto& [k, t] : file) d->set(str_value(k), make<TensorObj>(t));
      return out;
    }
    std::set<std::string> used;
    Value out = unflatten_tree(in, *like, "", file, &used, path, loc);
    for (const auto& [k, t] : file)
      if (!used.count(k))
        in.fail(loc, "load: '" + path + "' holds '" + k + "', which the structure given by like= does not have (" +
                         std::to_string(file.size() - used.size()) + " such)");
    return out;
  } catch (const std::runtime_error& e) {
    in.fail(loc, std::string("load: ") + e.what());
  }
}

Value builtin_load_module(Interpreter& in, CallArgs& a, SourceLoc loc) {
  if (a.pos.size() != 1 || !a.pos[0].is(VT::Str))
    in.fail(loc, "load_module(path, **settings) takes the path of a .trace file and its settings (like --set)");
  if (in.tracing()) in.fail(loc, "load_module() cannot run inside a traced function");
  // Relative to the file that calls it; a program may load the modules beside it (and below its
  // directory), or any below the directories the host lets it read.
  std::string path = a.pos[0].as<StrObj>()->s;
  fs::path base = loc.valid() ? fs::path(in.sources().name(loc.file)).parent_path() : fs::path();
  fs::path p = fs::path(path).is_absolute() ? fs::path(path) : base / path;
  std::vector<std::string> dirs = in.allowed_read();
  std::error_code ec;
  if (!base.empty()) dirs.push_back(fs::weakly_canonical(fs::absolute(base, ec), ec).string());
  std::string why;
  std::string full = permitted(p.string(), dirs, "reading", &why);
  if (full.empty()) in.fail(loc, "load_module: " + why);
  std::ifstream f(full, std::ios::binary);
  if (!f) in.fail(loc, "load_module: cannot read '" + p.string() + "': " + std::strerror(errno));
  std::string text((std::istreambuf_iterator<char>(f)), {});
  std::map<std::string, Value> pinned;
  for (const auto& [k, v] : a.kw) {
    if (!(v.is_number() || v.is(VT::Str) || v.is(VT::None)))
      in.fail(loc, "load_module: setting '" + k + "' is a " + type_name(v.type()) + "; settings are numbers, strings or None");
    pinned[k] = v;
  }
  DiagnosticList diags;
  auto m = in.load(p.string(), std::move(text), diags, pinned);
  if (!m) {
    const Diagnostic& d = diags.items().front();
    LineCol lc = d.loc.valid() ? in.sources().line_col(d.loc) : LineCol{};
    in.fail(loc, "load_module: " + p.string() + (d.loc.valid() ? ":" + std::to_string(lc.line) + ":" + std::to_string(lc.col) : "") +
                     ": " + d.message);
  }
  for (const auto& [k, v] : pinned)
    if (!m->module_defs.count(k))
      in.fail(loc, "load_module: setting '" + k + "' names nothing that " + p.string() + " defines");
  auto* ns = new NamespaceObj(p.stem().string());
  Value out(ns);
  for (const auto& [k, v] : m->globals)
    if (!k.empty() && k[0] != '_') ns->members[k] = v;
  return out;
}

}  // namespace tracer::interp
