// Reading and writing tensors as .npy (NumPy format 1.0/2.0/3.0) and .safetensors files.
// Every error is a std::runtime_error naming the file (and tensor) so users can act on it.
#include "runtime/io.h"

#include <nlohmann/json.hpp>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>
#include <stdexcept>

#include "runtime/kernel_util.h"

#include <unistd.h>

namespace tracer::rt {

namespace {
[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw std::runtime_error(path + ": " + what);
}

struct InFile {
  std::ifstream in;
  uint64_t size = 0;
  std::string path;
  explicit InFile(const std::string& p) : in(p, std::ios::binary), path(p) {
    if (!in) fail(p, std::string("cannot open for reading: ") + std::strerror(errno));
    in.seekg(0, std::ios::end);
    size = static_cast<uint64_t>(in.tellg());
    in.seekg(0);
  }
  // Reads exactly n bytes at pos; `what` describes the data for the truncation message.
  void read_at(uint64_t pos, void* dst, uint64_t n, const std::string& what) {
    uint64_t have = pos <= size ? size - pos : 0;
    if (have < n)
      fail(path, "truncated " + what + ": expected " + std::to_string(n) + " bytes, found " + std::to_string(have));
    if (n == 0) return;
    in.seekg(static_cast<std::streamoff>(pos));
    in.read(static_cast<char*>(dst), static_cast<std::streamsize>(n));
    if (!in) fail(path, "read error in " + what);
  }
};

// Whole or not at all: written to a temporary file beside path, then renamed over it, so that a
// failed write (a full disk, a crash) leaves the file that was there before intact.
void write_all(const std::string& path, const std::string& header, const std::vector<const Tensor*>& ts) {
  namespace fs = std::filesystem;
  std::string tmp = path + ".tmp" + std::to_string(::getpid()) + "_" +
                    std::to_string(std::hash<std::thread::id>()(std::this_thread::get_id()));
  std::error_code ec;
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail(path, std::string("cannot open for writing: ") + std::strerror(errno));
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    for (const Tensor* t : ts)
      if (t->nbytes()) out.write(static_cast<const char*>(t->data()), static_cast<std::streamsize>(t->nbytes()));
    out.flush();
    if (!out) {
      out.close();
      fs::remove(tmp, ec);
      fail(path, "write failed (the file that was there is left as it was)");
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) {
    std::string why = ec.message();
    fs::remove(tmp, ec);
    fail(path, "cannot replace the file: " + why);
  }
}

// ---- A parser for the Python dict literal in .npy headers. ----
struct PyVal {
  enum Kind { Str, Int, Bool, None, Tuple, Dict } kind = None;
  std::string str;
  int64_t num = 0;
  std::vector<PyVal> items;
  std::vector<std::pair<std::string, PyVal>> dict;
};

class PyParser {
 public:
  PyParser(const std::string& s, const std::string& path) : s_(s), path_(path) {}
  PyVal parse_top() {
    PyVal v = value();
    skip_ws();
    if (pos_ != s_.size()) error("unexpected trailing characters");
    return v;
  }

 private:
  [[noreturn]] void error(const std::string& why) {
    fail(path_, "header not parseable (" + why + " at offset " + std::to_string(pos_) + "): " + s_);
  }
  void skip_ws() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool eat(char c) {
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == c) return ++pos_, true;
    return false;
  }
  PyVal value() {
    skip_ws();
    if (pos_ >= s_.size()) error("unexpected end");
    char c = s_[pos_];
    if (c == '{') return dict();
    if (c == '(') return seq(')');
    if (c == '[') return seq(']');
    if (c == '\'' || c == '"') return string();
    if (c == '-' || c == '+' || std::isdigit(static_cast<unsigned char>(c))) return integer();
    return word();
  }
  PyVal string() {
    char q = s_[pos_++];
    PyVal v;
    v.kind = PyVal::Str;
    while (pos_ < s_.size() && s_[pos_] != q) {
      if (s_[pos_] == '\\' && pos_ + 1 < s_.size()) ++pos_;
      v.str += s_[pos_++];
    }
    if (pos_ >= s_.size()) error("unterminated string");
    ++pos_;
    return v;
  }
  PyVal integer() {
    size_t start = pos_;
    if (s_[pos_] == '-' || s_[pos_] == '+') ++pos_;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    PyVal v;
    v.kind = PyVal::Int;
    try {
      v.num = std::stoll(s_.substr(start, pos_ - start));
    } catch (const std::exception&) {
      error("bad integer");
    }
    if (pos_ < s_.size() && (s_[pos_] == 'L' || s_[pos_] == 'l')) ++pos_;  // Python 2 longs
    return v;
  }
  PyVal word() {
    size_t start = pos_;
    while (pos_ < s_.size() && std::isalpha(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    std::string w = s_.substr(start, pos_ - start);
    PyVal v;
    if (w == "True" || w == "False") {
      v.kind = PyVal::Bool;
      v.num = w == "True";
    } else if (w != "None") {
      error("unexpected token '" + w + "'");
    }
    return v;
  }
  PyVal seq(char close) {
    ++pos_;
    PyVal v;
    v.kind = PyVal::Tuple;
    while (!eat(close)) {
      v.items.push_back(value());
      if (!eat(',')) {
        if (!eat(close)) error("expected ',' or closing bracket");
        break;
      }
    }
    return v;
  }
  PyVal dict() {
    ++pos_;
    PyVal v;
    v.kind = PyVal::Dict;
    while (!eat('}')) {
      PyVal key = value();
      if (key.kind != PyVal::Str) error("dict key is not a string");
      if (!eat(':')) error("expected ':'");
      v.dict.emplace_back(key.str, value());
      if (!eat(',')) {
        if (!eat('}')) error("expected ',' or '}'");
        break;
      }
    }
    return v;
  }

  const std::string& s_;
  const std::string& path_;
  size_t pos_ = 0;
};

const PyVal* dict_get(const PyVal& d, const std::string& key) {
  for (const auto& [k, v] : d.dict)
    if (k == key) return &v;
  return nullptr;
}

struct NpyType { const char* descr; DType dt; };
const NpyType kNpyTypes[] = {
    {"<f8", DType::f64}, {"<f4", DType::f32}, {"<f2", DType::f16}, {"bfloat16", DType::bf16},
    {"<i8", DType::i64}, {"<i4", DType::i32}, {"|i1", DType::i8},  {"|u1", DType::u8},
    {"|b1", DType::b8},
};

DType npy_dtype(const std::string& path, std::string descr) {
  // Single-byte types carry no byte order; '=' is native, which we take to be little-endian.
  if (descr.size() == 3 && descr[2] == '1' && (descr[0] == '<' || descr[0] == '>' || descr[0] == '='))
    descr[0] = '|';
  if (descr.size() == 3 && descr[0] == '=') descr[0] = '<';
  for (const NpyType& t : kNpyTypes)
    if (descr == t.descr) return t.dt;
  if (!descr.empty() && descr[0] == '>')
    fail(path, "big-endian data ('" + descr + "') is not supported; convert with .astype('<" + descr.substr(1) + "')");
  fail(path, "unsupported dtype '" + descr + "'");
}

const char* npy_descr(DType dt) {
  for (const NpyType& t : kNpyTypes)
    if (t.dt == dt) return t.descr;
  return "?";
}

uint64_t read_le(const unsigned char* p, int n) {
  uint64_t v = 0;
  for (int i = n; i-- > 0;) v = (v << 8) | p[i];
  return v;
}

std::string le_bytes(uint64_t v, int n) {
  std::string s(static_cast<size_t>(n), '\0');
  for (int i = 0; i < n; ++i) s[static_cast<size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

Shape npy_shape(const std::string& path, const PyVal* v) {
  if (!v || v->kind != PyVal::Tuple) fail(path, "header has no 'shape' tuple");
  Shape shape;
  for (const PyVal& d : v->items) {
    if (d.kind != PyVal::Int || d.num < 0) fail(path, "header 'shape' has a non-integer or negative entry");
    shape.push_back(d.num);
  }
  return shape;
}
}  // namespace

Tensor read_npy(const std::string& path, Allocator* al) {
  InFile f(path);
  unsigned char pre[12];
  if (f.size < 10) fail(path, "not a .npy file (too short: " + std::to_string(f.size) + " bytes)");
  f.read_at(0, pre, 10, "preamble");
  if (std::memcmp(pre, "\x93NUMPY", 6) != 0) fail(path, "bad magic: not a .npy file");
  int major = pre[6];
  if (major < 1 || major > 3) fail(path, "unsupported .npy format version " + std::to_string(major));
  int len_bytes = major == 1 ? 2 : 4;
  if (len_bytes == 4) f.read_at(0, pre, 12, "preamble");
  uint64_t header_len = read_le(pre + 8, len_bytes);
  uint64_t data_start = 8 + static_cast<uint64_t>(len_bytes) + header_len;
  std::string header(static_cast<size_t>(std::min<uint64_t>(header_len, f.size)), '\0');
  f.read_at(8 + static_cast<uint64_t>(len_bytes), header.data(), header_len, "header");

  PyVal dict = PyParser(header, path).parse_top();
  if (dict.kind != PyVal::Dict) fail(path, "header is not a dict: " + header);
  const PyVal* descr = dict_get(dict, "descr");
  if (!descr || descr->kind != PyVal::Str) fail(path, "header has no string 'descr' (structured dtypes are unsupported)");
  DType dt = npy_dtype(path, descr->str);
  Shape shape = npy_shape(path, dict_get(dict, "shape"));
  const PyVal* fortran = dict_get(dict, "fortran_order");
  if (!fortran || fortran->kind != PyVal::Bool) fail(path, "header has no boolean 'fortran_order'");
  if (fortran->num && shape.size() > 1)
    fail(path, "Fortran-order arrays are not supported; save with np.ascontiguousarray");

  // Check the size before allocating, so a corrupt shape cannot ask for terabytes.
  uint64_t want = dtype_size(dt);
  for (int64_t d : shape)
    if (__builtin_mul_overflow(want, static_cast<uint64_t>(d), &want)) fail(path, "shape " + shape_str(shape) + " is too large");
  uint64_t have = f.size > data_start ? f.size - data_start : 0;
  if (want > have)
    fail(path, "truncated data: expected " + std::to_string(want) + " bytes, found " + std::to_string(have));
  Tensor t = Tensor::empty(dt, shape, al);
  f.read_at(data_start, t.data(), t.nbytes(), "data");
  return t;
}

void write_npy(const std::string& path, const Tensor& t) {
  detail::require_defined(t, "write_npy");
  std::string shape = "(";
  for (int64_t d : t.shape()) shape += std::to_string(d) + ", ";
  if (t.dim() > 0) shape.erase(shape.size() - 1);  // keep "(5,)" for 1-D, drop other trailing spaces
  if (t.dim() > 1) shape.pop_back();
  shape += ")";
  std::string dict = std::string("{'descr': '") + npy_descr(t.dtype()) +
                     "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad with spaces and a final newline so the data starts on a 64-byte boundary.
  bool v2 = dict.size() + 1 + 10 > 65535;
  size_t pre = v2 ? 12 : 10;
  size_t total = (pre + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - pre - dict.size() - 1, ' ');
  dict += '\n';
  std::string header = std::string("\x93NUMPY", 6) + (v2 ? std::string("\x02\x00", 2) : std::string("\x01\x00", 2)) +
                       le_bytes(dict.size(), v2 ? 4 : 2) + dict;
  write_all(path, header, {&t});
}

namespace {
struct StType { const char* name; DType dt; };
const StType kStTypes[] = {
    {"F64", DType::f64}, {"F32", DType::f32}, {"F16", DType::f16}, {"BF16", DType::bf16},
    {"I64", DType::i64}, {"I32", DType::i32}, {"I8", DType::i8},   {"U8", DType::u8},
    {"BOOL", DType::b8},
};

// Validates one header entry and returns the tensor's dtype, shape and [begin, end).
struct StEntry { DType dt; Shape shape; uint64_t begin, end; };
StEntry parse_entry(const std::string& path, const std::string& name, const nlohmann::json& e,
                    uint64_t data_size) {
  auto bad = [&](const std::string& why) { fail(path, "tensor '" + name + "': " + why); };
  if (!e.is_object()) bad("header entry is not an object");
  if (!e.contains("dtype") || !e["dtype"].is_string()) bad("missing string 'dtype'");
  if (!e.contains("shape") || !e["shape"].is_array()) bad("missing array 'shape'");
  if (!e.contains("data_offsets") || !e["data_offsets"].is_array() || e["data_offsets"].size() != 2)
    bad("'data_offsets' must be an array of two integers");
  StEntry out{};
  std::string dname = e["dtype"].get<std::string>();
  bool found = false;
  for (const StType& t : kStTypes)
    if (dname == t.name) out.dt = t.dt, found = true;
  if (!found) bad("unsupported dtype '" + dname + "'");
  for (const auto& d : e["shape"]) {
    if (!d.is_number_unsigned()) bad("shape entries must be non-negative integers");
    out.shape.push_back(d.get<int64_t>());
  }
  const auto& offs = e["data_offsets"];
  if (!offs[0].is_number_unsigned() || !offs[1].is_number_unsigned()) bad("'data_offsets' must be non-negative integers");
  out.begin = offs[0].get<uint64_t>();
  out.end = offs[1].get<uint64_t>();
  if (out.end < out.begin || out.end > data_size)
    bad("data_offsets [" + std::to_string(out.begin) + ", " + std::to_string(out.end) +
        "] lie outside the data section of " + std::to_string(data_size) + " bytes");
  uint64_t want = dtype_size(out.dt);
  for (int64_t d : out.shape)
    if (__builtin_mul_overflow(want, static_cast<uint64_t>(d), &want)) bad("shape " + shape_str(out.shape) + " is too large");
  if (out.end - out.begin != want)
    bad("data_offsets span " + std::to_string(out.end - out.begin) + " bytes but shape " +
        shape_str(out.shape) + " of " + dname + " needs " + std::to_string(want));
  return out;
}
}  // namespace

std::map<std::string, Tensor> read_safetensors(const std::string& path, Allocator* al) {
  InFile f(path);
  unsigned char lenbuf[8];
  f.read_at(0, lenbuf, 8, "header length");
  uint64_t n = read_le(lenbuf, 8);
  if (n > f.size - 8)
    fail(path, "header length " + std::to_string(n) + " exceeds the file size " + std::to_string(f.size));
  std::string text(static_cast<size_t>(n), '\0');
  f.read_at(8, text.data(), n, "header");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(path, std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) fail(path, "header is not a JSON object");
  uint64_t data_start = 8 + n, data_size = f.size - data_start;
  std::map<std::string, Tensor> out;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    StEntry e = parse_entry(path, name, entry, data_size);
    Tensor t = Tensor::empty(e.dt, e.shape, al);
    f.read_at(data_start + e.begin, t.data(), t.nbytes(), "data of tensor '" + name + "'");
    out.emplace(name, std::move(t));
  }
  return out;
}

void write_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  std::vector<const Tensor*> order;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (!t.defined()) fail(path, "tensor '" + name + "' is undefined");
    const char* dname = "";
    for (const StType& s : kStTypes)
      if (s.dt == t.dtype()) dname = s.name;
    header[name] = {{"dtype", dname}, {"shape", t.shape()}, {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
    order.push_back(&t);
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keep the data 8-byte aligned, as the format does
  write_all(path, le_bytes(text.size(), 8) + text, order);
}

bool write_file_atomically(const std::string& path, const std::string& data, std::string* err) {
  namespace fs = std::filesystem;
  std::string tmp = path + ".tmp" + std::to_string(::getpid()) + "_" +
                    std::to_string(std::hash<std::thread::id>()(std::this_thread::get_id()));
  std::error_code ec;
  {
    std::ofstream f(tmp, std::ios::binary);
    f.write(data.data(), static_cast<std::streamsize>(data.size()));
    if (!f) {
      fs::remove(tmp, ec);
      *err = "cannot write '" + tmp + "'";
      return false;
    }
  }
  fs::rename(tmp, path, ec);  // atomic: readers see the old file or the whole new one
  if (ec) {
    *err = "cannot write '" + path + "': " + ec.message();
    fs::remove(tmp, ec);
    return false;
  }
  return true;
}

}  // namespace tracer::rt
