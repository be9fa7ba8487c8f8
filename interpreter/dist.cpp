// Distribution in the language (docs/distributed.md, "Collectives in traces"): the job's world
// as dist.group(), dist.world_size() and dist.rank(); Thunder's printed process-group and
// reduce-op objects; and the world size a printout implies when no job or --world-size gives it.
#include <cctype>
#include <map>

#include "interpreter/interp.h"

namespace tracer::interp {

namespace {

bool has_prefix_and_number(const std::string& s, const std::string& prefix) {
  if (s.size() <= prefix.size() || s.compare(0, prefix.size(), prefix) != 0) return false;
  for (size_t i = prefix.size(); i < s.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  return true;
}

// The last name of a callee (`torch_all_gather_prim_impl`, `thunder.distributed.prims.all_gather`).
std::string callee_name(const ast::Expr& e) {
  if (e.kind == ast::ExprKind::Name || e.kind == ast::ExprKind::Attribute) return e.name;
  return "";
}

// Every type string a block states by name (type comment lines and trailing type comments),
// and its assignments whose value is a call, nested blocks included.
void scan(const ast::Block& b, std::map<std::string, std::string>& types, std::vector<const ast::Stmt*>& calls) {
  for (const ast::StmtPtr& s : b) {
    if (s->kind == ast::StmtKind::TypeComment) types.emplace(s->name, s->type_string);
    for (const ast::TypeComment& tc : s->type_comments) types.emplace(tc.name, tc.type_string);
    if (s->is_assign() && s->value && s->value->kind == ast::ExprKind::Call) calls.push_back(s.get());
    scan(s->body, types, calls);
    scan(s->orelse, types, calls);
  }
}

}  // namespace

// A printout's collectives state the group's size through their types: an all_gather of [32]
// into [64] along dim 0 is a group of 2; a reduce_scatter the other way. The first such
// statement whose operand's and result's types are both stated decides; 0 when none does.
int64_t infer_world_size(const ast::Block& body) {
  std::map<std::string, std::string> types;
  std::vector<const ast::Stmt*> calls;
  scan(body, types, calls);
  for (const ast::Stmt* s : calls) {
    const ast::Expr& call = *s->value;
    std::string name = callee_name(*call.items[0]);
    bool gather = name == "all_gather" || name == "torch_all_gather_prim_impl";
    bool scatter = name == "reduce_scatter" || name == "torch_reduce_scatter_prim_impl";
    if ((!gather && !scatter) || call.args.empty() || call.args[0]->kind != ast::ExprKind::Name) continue;
    if (s->targets.size() != 1 || s->targets[0]->kind != ast::ExprKind::Name) continue;
    auto in = types.find(call.args[0]->name), out = types.find(s->targets[0]->name);
    if (in == types.end() || out == types.end()) continue;
    std::string why;
    auto ti = ir::parse_type_string(in->second, &why), to = ir::parse_type_string(out->second, &why);
    if (!ti || !to || ti->shape.empty() || ti->shape.size() != to->shape.size()) continue;
    // The dimension: the last positional argument of the form (dim), or dim=, else 0.
    int64_t dim = 0;
    size_t dim_pos = gather ? 3 : 4;
    if (call.args.size() > dim_pos && call.args[dim_pos]->kind == ast::ExprKind::Int) dim = call.args[dim_pos]->int_value;
    for (const ast::Keyword& k : call.keywords)
      if (k.name == "dim" && k.value && k.value->kind == ast::ExprKind::Int) dim = k.value->int_value;
    int64_t r = static_cast<int64_t>(ti->shape.size());
    if (dim < 0) dim += r;
    if (dim < 0 || dim >= r) continue;
    int64_t a = ti->shape[static_cast<size_t>(dim)], b = to->shape[static_cast<size_t>(dim)];
    if (scatter) std::swap(a, b);
    if (a > 0 && b % a == 0 && b / a >= 1) return b / a;
  }
  return 0;
}

Value Interpreter::world_group(const Module* m) {
  int64_t size = world_size_;
  if (size <= 0 && m && m->ast) size = infer_world_size(m->ast->body);
  if (size <= 0) size = 1;
  return make<TupleObj>(std::vector<Value>{str_value("world"), Value::integer(size)});
}

bool Interpreter::is_thunder_object_name(const std::string& name) {
  return has_prefix_and_number(name, "_torch_distributed_distributed_c10d_ProcessGroup_") ||
         has_prefix_and_number(name, "_DistributedReduceOps_") || has_prefix_and_number(name, "_torch_memory_format_");
}

const Value* Interpreter::thunder_object(const std::string& name, const Module& m) {
  // One value per source file, world size and name (names' inline caches point at it; std::map
  // keeps addresses; source file ids are never reused).
  auto key = std::make_tuple(m.file, world_size_, name);
  if (auto it = thunder_objects_.find(key); it != thunder_objects_.end()) return &it->second;
  // Thunder prints objects it cannot write as values by their type and a counter.
  if (has_prefix_and_number(name, "_torch_distributed_distributed_c10d_ProcessGroup_"))
    return &thunder_objects_.emplace(key, world_group(&m)).first->second;
  // Thunder's FSDP and DDP reduce with DistributedReduceOps.SUM (scaling by the world size
  // before): the printed object names the op's type, not its value.
  if (has_prefix_and_number(name, "_DistributedReduceOps_")) return &thunder_objects_.emplace(key, str_value("sum")).first->second;
  // torch.memory_format objects (Tensor.contiguous(t, memory_format=_torch_memory_format_0)):
  // tensors are dense here whatever their layout.
  if (has_prefix_and_number(name, "_torch_memory_format_")) return &thunder_objects_.emplace(key, str_value("memory_format")).first->second;
  return nullptr;
}

}  // namespace tracer::interp
