// The C API's natives (host functions scripts call) and native ops (host primitives traces
// record, run by the executors with the host's kernel).
#include "api/c_api_impl.h"

using namespace tracer::capi;

extern "C" {

tracer_status tracer_register_natives(tracer_state* S, const tracer_native* table, size_t n) {
  return guarded(S, [&] {
    if (n && !table) return fail(S, TRACER_ERROR_ARGUMENT, "tracer_register_natives: table is null");
    for (size_t i = 0; i < n; ++i) {
      const tracer_native& nt = table[i];
      if (!nt.name || !nt.fn) return fail(S, TRACER_ERROR_ARGUMENT, "native " + std::to_string(i) + ": name and fn must be given");
      std::string name = nt.name;
      if (!is_identifier(name)) return fail(S, TRACER_ERROR_ARGUMENT, "native '" + name + "': a name must be an identifier");
    }
    for (size_t i = 0; i < n; ++i) {
      const tracer_native nt = table[i];
      auto def = std::make_shared<interp::NativeDef>();
      def->name = nt.name;
      def->signature = nt.signature ? nt.signature : "";
      def->doc = nt.doc ? nt.doc : "";
      std::string name = def->name;
      def->fn = [S, nt, name](interp::Interpreter& in, interp::CallArgs& args, tracer::SourceLoc loc) -> Value {
        if (!args.kw.empty()) in.fail(loc, name + "() takes no keyword arguments");
        std::vector<tracer_value> cargs;
        for (const Value& v : args.pos) {
          switch (v.type()) {
            case VT::None: cargs.push_back(tracer_value{TRACER_NONE, {0}}); break;
            case VT::Bool: cargs.push_back(tracer_value_bool(v.as_bool())); break;
            case VT::Int: cargs.push_back(tracer_value_int(v.as_int())); break;
            case VT::Float: cargs.push_back(tracer_value_float(v.as_float())); break;
            case VT::Tensor: cargs.push_back(tracer_value_tensor(new_handle(S, v.as<interp::TensorObj>()->host()))); break;
            case VT::Proxy:
              tracer_values_release(cargs.data(), cargs.size());
              in.fail(loc, name + "() is a native function: it runs on tensors and cannot be traced");
            default:
              tracer_values_release(cargs.data(), cargs.size());
              in.fail(loc, name + "() takes tensors, numbers, bools and None, not a " + interp::type_name(v.type()));
          }
        }
        tracer_value result{TRACER_NONE, {0}};
        S->native_error.clear();
        tracer_status st = nt.fn(S, nt.user, cargs.data(), cargs.size(), &result);
        // The result first: a native may hand back one of its arguments without retaining it.
        Value out = st != TRACER_OK || (result.kind == TRACER_TENSOR && !result.as.tensor) ? Value() : to_script(result);
        tracer_values_release(cargs.data(), cargs.size());
        tracer_values_release(&result, 1);  // the reference the native handed over
        if (st != TRACER_OK) {
          std::string msg = S->native_error.empty() ? std::string("failed: ") + tracer_status_name(st) : S->native_error;
          in.fail(loc, name + "(): " + msg);
        }
        return out;
      };
      S->impl->in->register_native(std::move(def));
    }
    return TRACER_OK;
  });
}

tracer_status tracer_register_ops(tracer_state* S, const tracer_op* table, size_t n) {
  return guarded(S, [&] {
    if (n && !table) return fail(S, TRACER_ERROR_ARGUMENT, "tracer_register_ops: table is null");
    for (size_t i = 0; i < n; ++i) {
      const tracer_op& o = table[i];
      if (!o.name || !o.type || !o.kernel)
        return fail(S, TRACER_ERROR_ARGUMENT, "op " + std::to_string(i) + ": name, type and kernel must be given");
      std::string name = o.name;
      if (!is_identifier(name)) return fail(S, TRACER_ERROR_ARGUMENT, "op '" + name + "': a name must be an identifier");
      if (ir::find_op(name))  // every check by op name in the executors and passes means a prim
        return fail(S, TRACER_ERROR_ARGUMENT, "op '" + name + "': prims." + name + " exists; choose another name");
      if (o.num_inputs < 0 || o.num_inputs > 64)
        return fail(S, TRACER_ERROR_ARGUMENT, "op '" + name + "': num_inputs must be between 0 and 64");
    }
    for (size_t i = 0; i < n; ++i) {
      const tracer_op o = table[i];
      ir::OpDecl d;
      d.name = o.name;
      d.ns = "native";
      d.kind = ir::OpKind::Other;
      d.doc = o.doc ? o.doc : "";
      d.signature = o.signature ? o.signature : "";
      for (int k = 0; k < o.num_inputs; ++k) {
        ir::ParamSpec p;
        p.name = "x" + std::to_string(k);
        d.params.push_back(std::move(p));
      }
      std::string qual = "native." + d.name;
      // The C type of an argument (a proxy while tracing, a tensor when run).
      auto type_of = [qual](const ir::Arg& a, size_t k) {
        tracer_type t{};
        rt::DType dt;
        rt::Shape sh;
        if (a.kind == ir::Arg::Kind::Proxy) {
          dt = a.proxy->type.dtype;
          sh = a.proxy->type.shape;
        } else if (a.kind == ir::Arg::Kind::Tensor) {
          dt = a.tensor.dtype();
          sh = a.tensor.shape();
        } else {
          throw ir::OpError("argument " + std::to_string(k + 1) + " is not a tensor");
        }
        if (sh.size() > TRACER_MAX_NDIM) throw ir::OpError("argument " + std::to_string(k + 1) + " has more than 16 dimensions");
        t.dtype = dtype_to_c(dt);
        t.ndim = static_cast<int>(sh.size());
        for (size_t j = 0; j < sh.size(); ++j) t.shape[j] = sh[j];
        return t;
      };
      auto output_type = [S, o, type_of](const std::vector<ir::Arg>& args) {
        std::vector<tracer_type> in;
        for (size_t k = 0; k < args.size(); ++k) in.push_back(type_of(args[k], k));
        tracer_type out{};
        S->native_error.clear();
        tracer_status st = o.type(S, o.user, in.data(), in.size(), &out);
        if (st != TRACER_OK) throw ir::OpError(S->native_error.empty() ? std::string(tracer_status_name(st)) : S->native_error);
        rt::DType dt;
        if (!dtype_from_c(out.dtype, &dt)) throw ir::OpError("the type function gave an unknown dtype");
        if (out.ndim < 0 || out.ndim > TRACER_MAX_NDIM) throw ir::OpError("the type function gave ndim " + std::to_string(out.ndim));
        rt::Shape sh(out.shape, out.shape + out.ndim);
        for (int64_t x : sh)
          if (x < 0) throw ir::OpError("the type function gave a negative size");
        return std::make_pair(ir::TensorType{dt, sh, "cpu"}, out);
      };
      d.meta = [output_type](const std::vector<ir::Arg>& args) { return std::vector<ir::TensorType>{output_type(args).first}; };
      d.cpu = [S, o, output_type](const std::vector<ir::Arg>& args, ir::ExecContext& ctx) {
        auto [type, ctype] = output_type(args);
        rt::Tensor out = rt::Tensor::empty(type.dtype, type.shape, ctx.allocator);
        std::vector<tracer_tensor*> in;
        for (const auto& a : args) in.push_back(new_handle(S, a.tensor));
        S->native_error.clear();
        tracer_status st = o.kernel(S, o.user, in.data(), in.size(), out.data(), &ctype);
        for (tracer_tensor* h : in) tracer_tensor_release(h);
        if (st != TRACER_OK) throw ir::OpError(S->native_error.empty() ? std::string(tracer_status_name(st)) : S->native_error);
        return std::vector<rt::Tensor>{std::move(out)};
      };
      S->impl->in->register_op(std::move(d));
    }
    return TRACER_OK;
  });
}

tracer_status tracer_native_error(tracer_state* S, const char* message) {
  if (!S) return TRACER_ERROR_ARGUMENT;
  try {
    S->native_error = message ? message : "";
  } catch (...) {
    S->native_error.clear();  // out of memory for the message: the status still says it failed
  }
  return TRACER_ERROR_SCRIPT;
}

}  // extern "C"
