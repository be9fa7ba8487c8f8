// Test helpers for the parser front end: parsing strings and printing AST nodes compactly.
#include "parse_helpers.h"

#include <cstdio>

#include "interpreter/parser.h"

namespace tracer::parse::testing {

using ast::Expr;
using ast::ExprKind;
using ast::Op;
using ast::Stmt;
using ast::StmtKind;

namespace {

const char* op_name(Op op) {
  static const char* names[] = {"Neg", "Pos", "Not", "Invert", "Add", "Sub", "Mul", "Div", "FloorDiv", "Mod",
                                "Pow", "MatMul", "BitAnd", "BitOr", "BitXor", "LShift", "RShift", "And", "Or",
                                "Lt", "Le", "Gt", "Ge", "Eq", "Ne", "In", "NotIn", "Is", "IsNot"};
  return names[static_cast<int>(op)];
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '"') out += "\\\"";
    else out += c;
  }
  return out + "\"";
}

std::string params_str(const std::vector<ast::Param>& params) {
  std::string out = "(";
  for (size_t i = 0; i < params.size(); ++i) {
    const ast::Param& p = params[i];
    if (i) out += " ";
    if (p.kind == ast::Param::Kind::VarArgs) out += "*";
    if (p.kind == ast::Param::Kind::KwArgs) out += "**";
    out += p.name;
    if (p.annotation) out += ":" + sexpr(p.annotation.get());
    if (p.default_value) out += "=" + sexpr(p.default_value.get());
  }
  return out + ")";
}

std::string items_str(const std::vector<ast::ExprPtr>& items) {
  std::string out;
  for (const auto& e : items) out += " " + sexpr(e.get());
  return out;
}

std::string number_str(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

std::string call_str(const Expr& e) {
  std::string out = "(Call " + sexpr(e.items[0].get()) + items_str(e.args);
  for (const auto& k : e.keywords) out += " " + (k.name.empty() ? "**" : k.name + "=") + sexpr(k.value.get());
  return out + ")";
}

std::string comp_str(const Expr& e) {
  std::string out = "(ListComp " + sexpr(e.items[0].get());
  for (const auto& c : e.comps) {
    out += " (for " + sexpr(c.target.get()) + " " + sexpr(c.iter.get());
    for (const auto& cond : c.conds) out += " (if " + sexpr(cond.get()) + ")";
    out += ")";
  }
  return out + ")";
}

std::string compare_str(const Expr& e) {
  std::string out = "(Compare " + sexpr(e.items[0].get());
  for (size_t i = 0; i < e.compare_ops.size(); ++i)
    out += std::string(" ") + op_name(e.compare_ops[i]) + " " + sexpr(e.items[i + 1].get());
  return out + ")";
}

std::string stmt_head(const Stmt& s) {
  auto targets = [&] {
    std::string out;
    for (const auto& t : s.targets) out += sexpr(t.get()) + " = ";
    return out;
  };
  switch (s.kind) {
    case StmtKind::Expr: return "expr " + sexpr(s.value.get());
    case StmtKind::Assign: return "assign " + targets() + sexpr(s.value.get());
    case StmtKind::AugAssign: return std::string("aug ") + op_name(s.op) + " " + targets() + sexpr(s.value.get());
    case StmtKind::AnnAssign:
      return "ann " + targets() + sexpr(s.annotation.get()) + (s.value ? " " + sexpr(s.value.get()) : "");
    case StmtKind::Del: return "del" + items_str(s.targets);
    case StmtKind::Pass: return "pass";
    case StmtKind::Break: return "break";
    case StmtKind::Continue: return "continue";
    case StmtKind::Return: return "return" + (s.value ? " " + sexpr(s.value.get()) : "");
    case StmtKind::If: return "if " + sexpr(s.value.get());
    case StmtKind::For: return "for " + sexpr(s.targets[0].get()) + " in " + sexpr(s.value.get());
    case StmtKind::While: return "while " + sexpr(s.value.get());
    case StmtKind::With:
      return "with " + sexpr(s.value.get()) + (s.targets.empty() ? "" : " as " + sexpr(s.targets[0].get()));
    case StmtKind::FunctionDef: {
      std::string out = "def " + s.name + params_str(s.params);
      if (s.returns) out += " -> " + sexpr(s.returns.get());
      for (const auto& d : s.decorators) out += " @" + sexpr(d.get());
      return out;
    }
    case StmtKind::Import: case StmtKind::ImportFrom: {
      std::string out = s.kind == StmtKind::Import ? "import" : "from " + s.module + " import";
      for (const auto& i : s.imports) out += " " + i.name + (i.asname.empty() ? "" : " as " + i.asname);
      return out;
    }
    case StmtKind::Raise: return "raise" + (s.value ? " " + sexpr(s.value.get()) : "");
    case StmtKind::Assert:
      return "assert " + sexpr(s.value.get()) + (s.annotation ? " " + sexpr(s.annotation.get()) : "");
    case StmtKind::Global: case StmtKind::Nonlocal: {
      std::string out = s.kind == StmtKind::Global ? "global" : "nonlocal";
      for (const auto& n : s.names) out += " " + n;
      return out;
    }
    case StmtKind::TypeComment: return "type " + s.name + " " + quote(s.type_string);
    case StmtKind::FusionDef:
      return (s.decomposed ? "decomposed " : "fusion ") + sexpr(s.targets[0].get()) + " = " + sexpr(s.value.get());
  }
  return "?";
}

}  // namespace

std::string sexpr(const Expr* e) {
  if (!e) return "_";
  switch (e->kind) {
    case ExprKind::Name: return e->name;
    case ExprKind::Int: return std::to_string(e->int_value);
    case ExprKind::Float: return number_str(e->float_value);
    case ExprKind::Str: return quote(e->str_value);
    case ExprKind::True: return "True";
    case ExprKind::False: return "False";
    case ExprKind::None: return "None";
    case ExprKind::Ellipsis: return "...";
    case ExprKind::List: return "(List" + items_str(e->items) + ")";
    case ExprKind::Tuple: return "(Tuple" + items_str(e->items) + ")";
    case ExprKind::Dict: {
      std::string out = "(Dict";
      for (size_t i = 0; i < e->keys.size(); ++i) out += " " + sexpr(e->keys[i].get()) + ":" + sexpr(e->items[i].get());
      return out + ")";
    }
    case ExprKind::Unary: case ExprKind::Binary: case ExprKind::BoolOp:
      return std::string("(") + op_name(e->op) + items_str(e->items) + ")";
    case ExprKind::Compare: return compare_str(*e);
    case ExprKind::IfExp: return "(IfExp" + items_str(e->items) + ")";
    case ExprKind::Call: return call_str(*e);
    case ExprKind::Attribute: return "(Attr " + sexpr(e->items[0].get()) + " " + e->name + ")";
    case ExprKind::Subscript: return "(Sub" + items_str(e->items) + ")";
    case ExprKind::Slice: return "(Slice" + items_str(e->items) + ")";
    case ExprKind::ListComp: return comp_str(*e);
    case ExprKind::Lambda: return "(Lambda " + params_str(e->params) + " " + sexpr(e->items[0].get()) + ")";
    case ExprKind::Starred: return "(Star " + sexpr(e->items[0].get()) + ")";
  }
  return "?";
}

std::string head(const Stmt& s) { return stmt_head(s); }

std::string dump(const ast::Block& block, int indent) {
  std::string out;
  for (const auto& s : block) {
    out += std::string(indent * 2, ' ') + stmt_head(*s);
    for (const auto& tc : s->type_comments) out += "  # " + tc.name + ": " + quote(tc.type_string);
    out += "\n";
    out += dump(s->body, indent + 1);
    if (!s->orelse.empty()) out += std::string(indent * 2, ' ') + "else\n" + dump(s->orelse, indent + 1);
  }
  return out;
}

std::vector<std::string> Parsed::errors() const {
  std::vector<std::string> out;
  for (const auto& d : diags.items()) {
    LineCol lc = sm.line_col(d.loc);
    out.push_back(std::to_string(lc.line) + ":" + std::to_string(lc.col) + ": " + d.message);
  }
  return out;
}

std::string Parsed::text_at(SourceLoc loc) const {
  if (!loc.valid()) return "<no loc>";
  return sm.text(loc.file).substr(loc.offset, loc.length);
}

std::unique_ptr<Parsed> parse_text(const std::string& text, const std::string& name) {
  auto p = std::make_unique<Parsed>();
  p->file = p->sm.add(name, text);
  p->module = parse_module(p->sm, p->file, p->diags);
  return p;
}

std::string expr_of(const std::string& expression) {
  auto p = parse_text("x = " + expression + "\n");
  if (p->diags.has_errors()) return "error: " + p->errors().front();
  if (p->module->body.size() != 1 || p->module->body[0]->kind != StmtKind::Assign) return "not an assignment";
  return sexpr(p->module->body[0]->value.get());
}

}  // namespace tracer::parse::testing
