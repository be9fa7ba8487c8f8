// The source of a module, printed back from its AST (unparse.h): one canonical form, so that
// printing what it prints gives the same text again.
#include "interpreter/unparse.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace tracer::ast {

namespace {

// Binding strength, loosest first (Python's table).
enum Prec { kLambda = 1, kIf, kOr, kAnd, kNot, kCmp, kBitOr, kBitXor, kBitAnd, kShift, kArith, kTerm, kUnary, kPow, kPrimary, kAtom };

}  // namespace

const char* op_text(Op op) {
  switch (op) {
    case Op::Neg: return "-";
    case Op::Pos: return "+";
    case Op::Not: return "not";
    case Op::Invert: return "~";
    case Op::Add: return "+";
    case Op::Sub: return "-";
    case Op::Mul: return "*";
    case Op::Div: return "/";
    case Op::FloorDiv: return "//";
    case Op::Mod: return "%";
    case Op::Pow: return "**";
    case Op::MatMul: return "@";
    case Op::BitAnd: return "&";
    case Op::BitOr: return "|";
    case Op::BitXor: return "^";
    case Op::LShift: return "<<";
    case Op::RShift: return ">>";
    case Op::And: return "and";
    case Op::Or: return "or";
    case Op::Lt: return "<";
    case Op::Le: return "<=";
    case Op::Gt: return ">";
    case Op::Ge: return ">=";
    case Op::Eq: return "==";
    case Op::Ne: return "!=";
    case Op::In: return "in";
    case Op::NotIn: return "not in";
    case Op::Is: return "is";
    case Op::IsNot: return "is not";
  }
  return "?";
}

namespace {

int binary_prec(Op op) {
  switch (op) {
    case Op::BitOr: return kBitOr;
    case Op::BitXor: return kBitXor;
    case Op::BitAnd: return kBitAnd;
    case Op::LShift:
    case Op::RShift: return kShift;
    case Op::Add:
    case Op::Sub: return kArith;
    case Op::Pow: return kPow;
    default: return kTerm;
  }
}

// The shortest decimal that reads back as the same double, always with a '.' or an exponent.
std::string float_text(double d) {
  if (std::isinf(d)) return d > 0 ? "1e309" : "-1e309";  // (a literal past the largest double reads back as the same infinity; float('inf') would be a call)
  if (std::isnan(d)) return "float('nan')";
  char buf[40];
  for (int p = 1; p <= 17; ++p) {
    std::snprintf(buf, sizeof buf, "%.*g", p, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  std::string s = buf;
  if (s.find_first_of(".einn") == std::string::npos) s += ".0";
  return s;
}

std::string str_text(const std::string& v) {
  std::string out = "'";
  for (unsigned char c : v) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\'': out += "\\'"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char b[8];
          std::snprintf(b, sizeof b, "\\x%02x", c);
          out += b;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "'";
}

class Printer {
 public:
  std::string expr(const Expr& e, int outer = kLambda) {
    int p = prec(e);
    std::string s = bare(e);
    return p < outer ? "(" + s + ")" : s;
  }

  std::string params(const std::vector<Param>& ps) {
    std::string out;
    for (size_t i = 0; i < ps.size(); ++i) {
      const Param& p = ps[i];
      if (i) out += ", ";
      if (p.kind == Param::Kind::VarArgs) out += "*";
      if (p.kind == Param::Kind::KwArgs) out += "**";
      out += p.name;
      if (p.annotation) out += ": " + expr(*p.annotation);
      if (p.default_value) out += (p.annotation ? " = " : "=") + expr(*p.default_value);
    }
    return out;
  }

  // A target list: `a, b` (a one-element tuple `a,`), parenthesized where nested.
  std::string target(const Expr& e) {
    if (e.kind != ExprKind::Tuple) return expr(e);
    std::string out;
    for (size_t i = 0; i < e.items.size(); ++i) out += (i ? ", " : "") + expr(*e.items[i], kOr);
    return e.items.size() == 1 ? out + "," : out;
  }

  void block(const Block& b, const std::string& indent, std::ostringstream& o) {
    if (b.empty()) o << indent << "pass\n";
    for (size_t i = 0; i < b.size(); ++i) {
      if (i > 0 && b[i]->blank_before) o << "\n";  // as the source had it
      stmt(*b[i], indent, o);
    }
  }

  void stmt(const Stmt& s, const std::string& indent, std::ostringstream& o) {
    for (const std::string& c : s.comments) o << indent << "#" << (c.empty() ? "" : " " + c) << "\n";
    one(s, indent, o);
    for (const std::string& c : s.after_comments) o << indent << "  #" << (c.empty() ? "" : " " + c) << "\n";
  }

  void one(const Stmt& s, const std::string& indent, std::ostringstream& o) {
    switch (s.kind) {
      case StmtKind::Expr: o << indent << expr(*s.value) << trailing(s) << "\n"; return;
      case StmtKind::Assign:
      case StmtKind::FusionDef: {
        o << indent;
        for (const auto& t : s.targets) o << target(*t) << " = ";
        o << expr(*s.value) << trailing(s) << "\n";
        // A fusion's (or a decomposed call's) body: its subsymbols, as commented lines.
        if (s.kind == StmtKind::FusionDef) {
          std::ostringstream sub;
          for (const auto& x : s.body) stmt(*x, "", sub);
          std::istringstream lines(sub.str());
          std::string line;
          // A body statement's own body (and comments under it) come back indented: they print
          // as the deeper comment lines they were, two columns a level.
          while (std::getline(lines, line)) {
            size_t n = line.find_first_not_of(' ');
            if (n != std::string::npos && n > 0 && line[n] == '#')
              o << indent << "  " << line << "\n";
            else
              o << indent << "  # " << line << "\n";
          }
        }
        return;
      }
      case StmtKind::AugAssign:
        o << indent << expr(*s.targets[0]) << " " << op_text(s.op) << "= " << expr(*s.value) << trailing(s) << "\n";
        return;
      case StmtKind::AnnAssign:
        o << indent << expr(*s.targets[0]) << ": " << expr(*s.annotation);
        if (s.value) o << " = " << expr(*s.value);
        o << trailing(s) << "\n";
        return;
      case StmtKind::Del: {
        o << indent << "del ";
        for (size_t i = 0; i < s.targets.size(); ++i) o << (i ? ", " : "") << expr(*s.targets[i], kOr);
        o << trailing(s) << "\n";
        return;
      }
      case StmtKind::Pass: o << indent << "pass\n"; return;
      case StmtKind::Break: o << indent << "break\n"; return;
      case StmtKind::Continue: o << indent << "continue\n"; return;
      case StmtKind::Return:
        o << indent << "return" << (s.value ? " " + (s.value->kind == ExprKind::Tuple && !s.value->parenthesized ? target(*s.value) : expr(*s.value)) : "")
          << trailing(s) << "\n";
        return;
      case StmtKind::If: {
        const Stmt* at = &s;
        o << indent << "if " << expr(*at->value) << ":\n";
        for (;;) {
          block(at->body, indent + "  ", o);
          if (at->orelse.size() == 1 && at->orelse[0]->kind == StmtKind::If && at->orelse[0]->comments.empty()) {
            at = at->orelse[0].get();
            o << indent << "elif " << expr(*at->value) << ":\n";
            continue;
          }
          if (!at->orelse.empty()) {
            o << indent << "else:\n";
            block(at->orelse, indent + "  ", o);
          }
          return;
        }
      }
      case StmtKind::For:
      case StmtKind::While:
        if (s.kind == StmtKind::For) o << indent << "for " << target(*s.targets[0]) << " in " << expr(*s.value) << ":\n";
        else o << indent << "while " << expr(*s.value) << ":\n";
        block(s.body, indent + "  ", o);
        if (!s.orelse.empty()) {
          o << indent << "else:\n";
          block(s.orelse, indent + "  ", o);
        }
        return;
      case StmtKind::FunctionDef:
        for (const auto& d : s.decorators) o << indent << "@" << expr(*d) << "\n";
        o << indent << "def " << s.name << "(" << params(s.params) << ")";
        if (s.returns) o << " -> " << expr(*s.returns);
        o << ":\n";
        block(s.body, indent + "  ", o);
        return;
      case StmtKind::With:
        o << indent << "with " << expr(*s.value);
        if (!s.targets.empty() && s.targets[0]) o << " as " << target(*s.targets[0]);
        o << ":\n";
        block(s.body, indent + "  ", o);
        return;
      case StmtKind::Import:
        o << indent << "import ";
        for (size_t i = 0; i < s.imports.size(); ++i)
          o << (i ? ", " : "") << s.imports[i].name << (s.imports[i].asname.empty() ? "" : " as " + s.imports[i].asname);
        o << "\n";
        return;
      case StmtKind::ImportFrom:
        o << indent << "from " << s.module << " import ";
        for (size_t i = 0; i < s.imports.size(); ++i)
          o << (i ? ", " : "") << s.imports[i].name << (s.imports[i].asname.empty() ? "" : " as " + s.imports[i].asname);
        o << "\n";
        return;
      case StmtKind::Raise: o << indent << "raise" << (s.value ? " " + expr(*s.value) : "") << "\n"; return;
      case StmtKind::Assert:
        o << indent << "assert " << expr(*s.value) << (s.annotation ? ", " + expr(*s.annotation) : "") << "\n";
        return;
      case StmtKind::Global:
      case StmtKind::Nonlocal: {
        o << indent << (s.kind == StmtKind::Global ? "global " : "nonlocal ");
        for (size_t i = 0; i < s.names.size(); ++i) o << (i ? ", " : "") << s.names[i];
        o << "\n";
        return;
      }
      case StmtKind::TypeComment:
        // `# x: "cpu f32[2]"`; a 2023 printout's unnamed string value `# "sum"` (kept as "str sum").
        if (s.name.empty() && s.type_string.rfind("str ", 0) == 0) o << indent << "# \"" << s.type_string.substr(4) << "\"\n";
        else o << indent << "# " << s.name << ": \"" << s.type_string << "\"\n";
        return;
    }
  }

 private:
  std::string trailing(const Stmt& s) {
    std::string out;
    for (size_t i = 0; i < s.type_comments.size(); ++i)
      out += std::string(i ? ", " : "  # ") + s.type_comments[i].name + ": \"" + s.type_comments[i].type_string + "\"";
    if (out.empty() && !s.trailing_comment.empty()) out = "  # " + s.trailing_comment;
    return out;
  }

  int prec(const Expr& e) {
    switch (e.kind) {
      case ExprKind::Lambda: return kLambda;
      case ExprKind::IfExp: return kIf;
      case ExprKind::BoolOp: return e.op == Op::Or ? kOr : kAnd;
      case ExprKind::Unary: return e.op == Op::Not ? kNot : kUnary;
      case ExprKind::Compare: return kCmp;
      case ExprKind::Binary: return binary_prec(e.op);
      case ExprKind::Call:
      case ExprKind::Attribute:
      case ExprKind::Subscript: return kPrimary;
      case ExprKind::Int: return e.int_value < 0 ? kUnary : kAtom;
      case ExprKind::Float: return e.float_value < 0 || std::signbit(e.float_value) ? kUnary : kAtom;
      default: return kAtom;
    }
  }

  std::string seq(const std::vector<ExprPtr>& xs) {
    std::string out;
    for (size_t i = 0; i < xs.size(); ++i) out += (i ? ", " : "") + expr(*xs[i]);
    return out;
  }

  std::string bare(const Expr& e) {
    switch (e.kind) {
      case ExprKind::Name: return e.name;
      case ExprKind::Int: return std::to_string(e.int_value);
      case ExprKind::Float: return float_text(e.float_value);
      case ExprKind::Str: return str_text(e.str_value);
      case ExprKind::True: return "True";
      case ExprKind::False: return "False";
      case ExprKind::None: return "None";
      case ExprKind::Ellipsis: return "...";
      case ExprKind::List: return "[" + seq(e.items) + "]";
      case ExprKind::Tuple: return e.items.size() == 1 ? "(" + expr(*e.items[0]) + ",)" : "(" + seq(e.items) + ")";
      case ExprKind::Dict: {
        std::string out = "{";
        for (size_t i = 0; i < e.items.size(); ++i)
          out += (i ? ", " : "") + (e.keys[i] ? expr(*e.keys[i]) + ": " + expr(*e.items[i]) : "**" + expr(*e.items[i], kPrimary));
        return out + "}";
      }
      case ExprKind::Unary: return std::string(op_text(e.op)) + (e.op == Op::Not ? " " : "") + expr(*e.items[0], e.op == Op::Not ? kNot : kUnary);
      case ExprKind::Binary: {
        int p = binary_prec(e.op);
        // Left-associative but for **, which binds right and tighter than a unary on its left.
        bool pow = e.op == Op::Pow;
        return expr(*e.items[0], pow ? kPrimary : p) + " " + op_text(e.op) + " " + expr(*e.items[1], pow ? kUnary : p + 1);
      }
      case ExprKind::BoolOp: {
        int p = e.op == Op::Or ? kOr : kAnd;
        std::string out;
        for (size_t i = 0; i < e.items.size(); ++i) out += (i ? std::string(" ") + op_text(e.op) + " " : "") + expr(*e.items[i], p + 1);
        return out;
      }
      case ExprKind::Compare: {
        std::string out = expr(*e.items[0], kCmp + 1);
        for (size_t i = 0; i < e.compare_ops.size(); ++i) out += std::string(" ") + op_text(e.compare_ops[i]) + " " + expr(*e.items[i + 1], kCmp + 1);
        return out;
      }
      case ExprKind::IfExp: return expr(*e.items[0], kOr) + " if " + expr(*e.items[1], kOr) + " else " + expr(*e.items[2], kIf);
      case ExprKind::Call: {
        std::string out = expr(*e.items[0], kPrimary) + "(";
        bool first = true;
        for (const auto& a : e.args) {
          out += (first ? "" : ", ") + expr(*a);
          first = false;
        }
        for (const Keyword& k : e.keywords) {
          out += (first ? "" : ", ") + (k.name.empty() ? "**" + expr(*k.value, kPrimary) : k.name + "=" + expr(*k.value));
          first = false;
        }
        return out + ")";
      }
      case ExprKind::Attribute: {
        // An int's attribute needs a space or parentheses: (1).real
        std::string obj = expr(*e.items[0], kPrimary);
        if (e.items[0]->kind == ExprKind::Int) obj = "(" + obj + ")";
        return obj + "." + e.name;
      }
      case ExprKind::Subscript: {
        const Expr& i = *e.items[1];
        std::string idx = i.kind == ExprKind::Tuple && !i.items.empty() ? seq(i.items) + (i.items.size() == 1 ? "," : "") : expr(i);
        return expr(*e.items[0], kPrimary) + "[" + idx + "]";
      }
      case ExprKind::Slice: {
        std::string out = (e.items[0] ? expr(*e.items[0]) : "") + ":" + (e.items[1] ? expr(*e.items[1]) : "");
        if (e.items.size() > 2 && e.items[2]) out += ":" + expr(*e.items[2]);
        return out;
      }
      case ExprKind::ListComp: {
        std::string out = "[" + expr(*e.items[0]);
        for (const Comprehension& c : e.comps) {
          out += " for " + target(*c.target) + " in " + expr(*c.iter, kOr);
          for (const auto& cond : c.conds) out += " if " + expr(*cond, kOr);
        }
        return out + "]";
      }
      case ExprKind::Lambda: return "lambda" + (e.params.empty() ? std::string() : " " + params(e.params)) + ": " + expr(*e.items[0]);
      case ExprKind::Starred: return "*" + expr(*e.items[0], kPrimary);
    }
    return "?";
  }
};

}  // namespace

std::string unparse(const Module& m) {
  Printer p;
  std::ostringstream o;
  for (const std::string& c : m.header_comments) o << "#" << (c.empty() ? "" : " " + c) << "\n";
  for (size_t i = 0; i < m.body.size(); ++i) {
    if (i && m.body[i]->kind == StmtKind::FunctionDef) o << "\n";
    p.stmt(*m.body[i], "", o);
  }
  return o.str();
}

std::string unparse(const Expr& e) { return Printer().expr(e); }

}  // namespace tracer::ast
