// The `tracer` program: run, print and check .trace files. Uses only the public API.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>

#include "launch.h"
#include "repl.h"
#include "tracer/session.h"
#include "tracer/tracer.h"

namespace {

struct Common {
  std::string file, entry, passes;
  std::vector<std::string> sets, inputs, types, pass_files, ops_files, print_after, allow_read, allow_write, script_args;
  bool verify = false, time_passes = false;
  uint64_t seed = 0;
  int64_t step_limit = 500'000'000;
  uint64_t memory_limit = 0;
  bool json = false;
  int world_size = 0, world_rank = 0;
};

tracer::SessionOptions session_options(const Common& c) {
  tracer::SessionOptions so;
  so.seed = c.seed;
  so.step_limit = c.step_limit;
  so.memory_limit = static_cast<size_t>(c.memory_limit);
  so.strict_settings = true;  // --set NAME=... for a name the file never mentions is an error
  so.world_size = c.world_size;
  so.world_rank = c.world_rank;
  return so;
}

int fail(const tracer::Session& s) {
  std::cerr << s.rendered_diagnostics();
  return 1;
}

// --set NAME=VALUE and --input NAME=FILE, applied before loading.
bool prepare(tracer::Session& s, const Common& c) {
  for (const std::string& kv : c.sets) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::cerr << "error: --set expects NAME=VALUE, got '" << kv << "'\n";
      return false;
    }
    s.set(kv.substr(0, eq), kv.substr(eq + 1));
  }
  for (const std::string& f : c.ops_files)
    if (!s.add_ops_file(f)) return false;
  for (const std::string& f : c.pass_files)
    if (!s.add_pass_file(f)) return false;
  if (!s.set_passes(tracer::split_passes(c.passes))) return false;
  if (!s.set_pass_options(c.verify, c.print_after)) return false;
  return s.load_file(c.file);
}

void report_pass_times(const tracer::Session& s, const Common& c) {
  if (!c.time_passes) return;
  double total = 0;
  for (const auto& p : s.pass_timings()) {
    std::cerr << fmt::format("# pass {:<16} {:9.1f} ms\n", p.name, p.ms);
    total += p.ms;
  }
  std::cerr << fmt::format("# passes total     {:9.1f} ms\n", total);
}

bool add_inputs(tracer::Session& s, const Common& c) {
  for (const std::string& kv : c.inputs) {
    size_t eq = kv.find('=');
    bool ok = eq == std::string::npos ? s.add_input("", kv) : s.add_input(kv.substr(0, eq), kv.substr(eq + 1));
    if (!ok) return false;
  }
  for (const std::string& kv : c.types) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::cerr << "error: --type expects NAME=TYPE (like x=f32[2, 3]), got '" << kv << "'\n";
      return false;
    }
    if (!s.set_input_type(kv.substr(0, eq), kv.substr(eq + 1))) return false;
  }
  return true;
}


nlohmann::json report_json(const std::string& file, const std::string& entry, const tracer::RunReport& r) {
  nlohmann::json j;
  j["file"] = file;
  j["entry"] = entry;
  j["device"] = r.device;
  if (r.device != "cpu") {
    j["device_peak_bytes"] = r.device_peak_bytes;
    j["kernels_launched"] = r.kernels_launched;
    j["horizontal_members"] = r.horizontal_members;
    j["kernels_compiled"] = r.kernels_compiled;
    j["kernel_disk_hits"] = r.kernel_disk_hits;
    j["gemms"] = r.gemms;
    j["gemm_gelu_epilogues"] = r.gelu_epilogues;
    j["gemm_dgelu_epilogues"] = r.dgelu_epilogues;
    if (r.matmul_tuned > 0 || r.matmul_tune_loaded > 0)
      j["matmul_tuning"] = {{"problems", r.matmul_tuned}, {"changed", r.matmul_tune_changed}, {"loaded", r.matmul_tune_loaded},
                            {"ms", r.matmul_tune_ms}, {"saved_ms_per_call", r.matmul_tune_saved_ms}};
    j["take_backward_adds_in_place"] = r.take_adds_in_place;
    j["cpu_fallbacks"] = r.cpu_fallbacks;
    j["collectives"] = r.collectives;
    j["fallback_ops"] = r.fallback_ops;
    j["compile_ms"] = r.compile_ms;
    j["compile_wall_ms"] = r.compile_wall_ms;
    j["attention"] = {{"cudnn", r.attention_cudnn}, {"tracer", r.attention_tracer}, {"fusions_read_in_place", r.attention_fusions_viewed},
                      {"cats_written_in_place", r.attention_cats_in_place}, {"outputs_written_transposed", r.attention_outputs_in_layout}};
    if (!r.cudnn_version.empty()) {
      j["cudnn"] = {{"version", r.cudnn_version}, {"library", r.cudnn_library}, {"plans_built", r.cudnn_plans_built},
                    {"plans_loaded", r.cudnn_plans_loaded}, {"plan_ms", r.cudnn_plan_ms}};
    } else if (!r.cudnn_missing.empty()) {
      j["cudnn"] = {{"missing", r.cudnn_missing}};
    }
    j["cuda_graph"] = r.cuda_graph;
    if (r.cuda_graph) j["graph"] = {{"nodes", r.graph_nodes}, {"bytes", r.graph_bytes}};
  }
  if (r.bench_runs > 0) {
    j["bench"] = {{"runs", r.bench_runs}, {"median_ms", r.bench_median_ms}, {"min_ms", r.bench_min_ms}, {"max_ms", r.bench_max_ms}};
    if (!r.bench_runs_ms.empty()) j["bench"]["runs_ms"] = r.bench_runs_ms;
    if (r.device != "cpu") {
      j["bench"]["host_median_ms"] = r.bench_host_median_ms;
      j["bench"]["launch_api_ms"] = r.bench_launch_api_ms;
    }
  }
  j["trace_ms"] = r.trace_ms;
  j["run_ms"] = r.run_ms;
  j["peak_bytes"] = r.peak_bytes;
  j["estimated_peak_bytes"] = r.estimated_peak_bytes;
  j["passes_ms"] = r.passes_ms;
  j["statements"] = r.statements;
  for (const auto& in : r.inputs)
    j["inputs"].push_back({{"name", in.name}, {"dtype", in.dtype}, {"shape", in.shape}, {"source", in.source}});
  for (const auto& o : r.outputs) {
    nlohmann::json x = {{"name", o.name}, {"summary", o.summary}};
    if (o.is_tensor) {
      x["dtype"] = o.dtype;
      x["shape"] = o.shape;
      x["sum"] = o.sum;
      x["head"] = o.head;
    }
    j["outputs"].push_back(x);
  }
  return j;
}

struct RunArgs {
  std::string device = "cpu";
  int bench = 0;
  bool cuda_graph = false;
};

// " (N with the GELU epilogue, M with the GELU backward's)" after the count of matmuls, or "".
std::string epilogues(const tracer::RunReport& r) {
  std::vector<std::string> parts;
  if (r.gelu_epilogues) parts.push_back(fmt::format("{} with the GELU epilogue", r.gelu_epilogues));
  if (r.dgelu_epilogues) parts.push_back(fmt::format("{} with the GELU backward's", r.dgelu_epilogues));
  return parts.empty() ? "" : " (" + fmt::format("{}", fmt::join(parts, ", ")) + ")";
}

int cmd_run(const Common& c, const std::string& output_dir, const RunArgs& ra) {
  tracer::SessionOptions so = session_options(c);
  so.main_program = true;  // `if __name__ == "__main__":` runs
  tracer::Session s(so);
  // A rank of a distributed job (tracer launch): the ranks meet before anything runs, and again
  // at the end, so that a rank that fails or hangs stops every other one within the timeout.
  if (!s.join_job()) return fail(s);
  // A rank's GPU is its LOCAL_RANK's, as under torchrun: --device cuda means cuda:LOCAL_RANK.
  std::string device = ra.device;
  if (auto job = s.job(); job && device == "cuda") device = "cuda:" + std::to_string(job->local_rank);
  if (ra.cuda_graph && ra.device == "cpu") {
    std::cerr << "error: --cuda-graph needs a GPU device (--device cuda or cuda:N)\n";
    return 1;
  }
  if (!s.set_device(device)) return fail(s);
  std::vector<std::string> argv{c.file};
  argv.insert(argv.end(), c.script_args.begin(), c.script_args.end());
  s.set_argv(argv);
  for (const std::string& d : c.allow_read)
    if (!s.allow_read(d)) return fail(s);
  for (const std::string& d : c.allow_write)
    if (!s.allow_write(d)) return fail(s);
  s.set_bench(ra.bench);
  s.set_cuda_graph(ra.cuda_graph);
  if (!prepare(s, c)) return fail(s);
  // A script (its top level does more than define) ran as it loaded; an entry runs only if named.
  if (c.entry.empty() && s.is_script()) {
    if (!c.inputs.empty() || !c.types.empty()) {
      std::cerr << s.rendered_diagnostics() << "error: " << c.file
                << " is a script (its top level runs); --input and --type are for a traced entry: name one with --entry\n";
      return 1;
    }
    std::cerr << s.rendered_diagnostics();
    return s.leave_job() ? 0 : fail(s);
  }
  auto entry = s.entry(c.entry);
  if (!entry || !add_inputs(s, c)) return fail(s);
  auto r = s.run(*entry, output_dir);
  if (!r) return fail(s);
  std::cerr << s.rendered_diagnostics();  // warnings of a run that succeeded (e.g. --cuda-graph not captured)
  report_pass_times(s, c);
  // The outputs are printed (and written) before the ranks meet at the end: a rank that the
  // others fail keeps what it computed.
  if (c.json) {
    nlohmann::json j = report_json(c.file, *entry, *r);
    if (auto job = s.job()) j["job"] = {{"rank", job->rank}, {"world_size", job->world_size}, {"local_rank", job->local_rank}, {"store", job->store}};
    std::cout << j.dump(2) << "\n";
    return s.leave_job() ? 0 : fail(s);
  }
  for (const auto& o : r->outputs) std::cout << o.name << ": " << o.summary << "\n";
  if (r->device == "cpu") {
    std::cerr << fmt::format("# {}: {} statements, traced in {:.1f} ms, ran in {:.1f} ms on cpu, peak {:.2f} MiB\n",
                             *entry, r->statements, r->trace_ms, r->run_ms, r->peak_bytes / 1048576.0);
  } else {
    std::cerr << fmt::format("# {}: {} statements, ran in {:.1f} ms on {} (first run; {} kernels compiled, {:.0f} ms wall, {:.0f} ms in all), device peak {:.2f} MiB\n",
                             *entry, r->statements, r->run_ms, r->device, r->kernels_compiled, r->compile_wall_ms,
                             r->compile_ms, r->device_peak_bytes / 1048576.0);
    std::cerr << fmt::format("# {} kernel launches{}, {} cuBLASLt matmuls{}, {} statements on the CPU{}\n", r->kernels_launched,
                             r->horizontal_members ? fmt::format(" ({} groups in horizontal kernels)", r->horizontal_members) : "",
                             r->gemms, epilogues(*r),
                             r->cpu_fallbacks,
                             r->fallback_ops.empty() ? "" : " (" + fmt::format("{}", fmt::join(r->fallback_ops, ", ")) + ")");
    if (r->attention_cudnn + r->attention_tracer > 0)
      std::cerr << fmt::format("# attention: {} on cuDNN{}, {} on tracer's kernels{}\n", r->attention_cudnn,
                               r->cudnn_version.empty() ? "" : " " + r->cudnn_version, r->attention_tracer,
                               r->cudnn_plans_built + r->cudnn_plans_loaded
                                   ? fmt::format(" (cuDNN plans: {} built, {} read from the cache, {:.0f} ms)", r->cudnn_plans_built,
                                                 r->cudnn_plans_loaded, r->cudnn_plan_ms)
                                   : "");
    if (r->cuda_graph)
      std::cerr << fmt::format("# cuda graph: {} nodes, {:.2f} MiB kept for its replays\n", r->graph_nodes, r->graph_bytes / 1048576.0);
  }
  if (r->bench_runs > 0) {
    std::cerr << fmt::format("# bench: {} runs, median {:.3f} ms (min {:.3f}, max {:.3f})\n", r->bench_runs, r->bench_median_ms,
                             r->bench_min_ms, r->bench_max_ms);
    if (r->device != "cpu")
      std::cerr << fmt::format("# host: {:.3f} ms to issue a run (median), {:.3f} ms of it in the driver's launch calls\n",
                               r->bench_host_median_ms, r->bench_launch_api_ms);
  }
  return s.leave_job() ? 0 : fail(s);
}

int cmd_print(const Common& c) {
  tracer::Session s(session_options(c));
  if (!prepare(s, c)) return fail(s);
  auto entry = s.entry(c.entry);
  if (!entry || !add_inputs(s, c)) return fail(s);
  // A printout whose inputs have no types (Thunder's older ones print `# t0` alone) is printed
  // as written, at the source level, and said so; its types make it trace (--type, --input).
  std::string why;
  if (c.passes.empty() && !s.inputs_typed(*entry, &why)) {
    auto src = s.print_source();
    if (!src) return fail(s);
    std::cerr << "note: '" << *entry << "' is printed as written, not traced: " << why << "\n";
    std::cout << *src;
    return 0;
  }
  auto text = s.print(*entry);
  if (!text) return fail(s);
  report_pass_times(s, c);
  std::cout << *text;
  return 0;
}

// Bytes in the unit that suits them: B, KiB, MiB or GiB, three significant decimals.
std::string gib(size_t b) {
  double v = static_cast<double>(b);
  if (b < 1024) return fmt::format("{} B", b);
  if (v < 1024.0 * 1024) return fmt::format("{:.1f} KiB", v / 1024);
  if (v < 1024.0 * 1024 * 1024) return fmt::format("{:.2f} MiB", v / (1024.0 * 1024));
  return fmt::format("{:.3f} GiB", v / (1024.0 * 1024 * 1024));
}

struct CompileArgs {
  std::string arch = "sm_90", emit = "cubin", out_dir;
};

int cmd_compile(const Common& c, const CompileArgs& a) {
  tracer::Session s(session_options(c));
  if (!prepare(s, c)) return fail(s);
  auto entry = s.entry(c.entry);
  if (!entry || !add_inputs(s, c)) return fail(s);
  std::string dir = a.out_dir;
  if (dir.empty()) dir = std::filesystem::path(c.file).stem().string() + ".kernels";
  auto r = s.compile(*entry, a.arch, a.emit, dir);
  if (!r) return fail(s);
  report_pass_times(s, c);
  if (c.json) {
    nlohmann::json j;
    j["file"] = c.file;
    j["entry"] = *entry;
    j["arch"] = r->arch;
    j["emit"] = r->emit;
    j["nvrtc"] = r->nvrtc_version;
    j["out_dir"] = r->out_dir;
    j["wall_ms"] = r->wall_ms;
    j["compiled"] = r->compiled;
    j["kernels"] = nlohmann::json::array();
    for (const auto& k : r->kernels)
      j["kernels"].push_back({{"name", k.name}, {"symbol", k.symbol}, {"trace", k.trace}, {"statement", k.statement}, {"file", k.file},
                              {"bytes", k.bytes}, {"compile_ms", k.compile_ms}, {"elements", k.elements},
                              {"vector_width", k.vector_width}});
    std::cout << j.dump(1) << "\n";
    return 0;
  }
  double sum = 0;
  for (const auto& k : r->kernels) {
    sum += k.compile_ms;
    std::cout << k.file << "  (" << k.bytes << " bytes";
    if (k.compile_ms > 0) std::cout << ", " << std::fixed << std::setprecision(1) << k.compile_ms << " ms";
    std::cout << ")\n    " << k.statement << "\n";
  }
  std::cout << "# " << r->kernels.size() << " kernels for " << r->arch << " (" << r->emit << ")";
  if (!r->nvrtc_version.empty())
    std::cout << ", " << r->compiled << " distinct, NVRTC " << r->nvrtc_version << ": " << std::fixed
              << std::setprecision(1) << r->wall_ms << " ms wall, " << sum << " ms in all";
  std::cout << "\n";
  return 0;
}

int cmd_mem(const Common& c, const std::string& plot, const std::string& device) {
  tracer::Session s(session_options(c));
  if (!prepare(s, c)) return fail(s);
  auto entry = s.entry(c.entry);
  if (!entry || !add_inputs(s, c)) return fail(s);
  auto m = s.memory(*entry, device);
  if (!m) return fail(s);
  report_pass_times(s, c);
  if (!plot.empty()) {
    std::FILE* f = std::fopen(plot.c_str(), "w");
    std::string svg = tracer::memory_svg(*m, c.file + (c.passes.empty() ? "" : " --passes " + c.passes));
    if (!f || std::fwrite(svg.data(), 1, svg.size(), f) != svg.size() || std::fclose(f) != 0) {
      std::cerr << "error: cannot write '" << plot << "'\n";
      return 1;
    }
  }
  if (c.json) {
    nlohmann::json j;
    j["file"] = c.file;
    j["entry"] = *entry;
    j["passes"] = tracer::split_passes(c.passes);
    j["peak_bytes"] = m->peak_bytes;
    j["peak_trace"] = m->peak_trace;
    j["peak_index"] = m->peak_index;
    j["peak_statement"] = m->peak_statement;
    j["saved_for_backward_bytes"] = m->saved_for_backward_bytes;
    j["saved_by_distribution"] = {{"replicated", m->saved_replicated_bytes}, {"sharded", m->saved_sharded_bytes},
                                  {"per_rank", m->saved_per_rank_bytes},
                                  {"unknown", m->saved_for_backward_bytes - m->saved_replicated_bytes - m->saved_sharded_bytes -
                                                  m->saved_per_rank_bytes}};
    j["comm_bytes_at_peak"] = m->peak_comm_bytes;
    j["comm_peak_bytes"] = m->comm_peak_bytes;
    j["world_size"] = m->world_size;
    j["rank"] = m->rank;
    j["input_bytes"] = m->input_bytes;
    j["traces"] = m->traces;
    j["peak_live"] = nlohmann::json::array();
    for (const auto& [name, bytes] : m->peak_live) j["peak_live"].push_back({{"name", name}, {"bytes", bytes}});
    j["timeline"] = nlohmann::json::array();
    for (const auto& p : m->timeline) j["timeline"].push_back({{"trace", p.trace}, {"index", p.index}, {"live_bytes", p.live_bytes}});
    std::cout << j.dump(1) << "\n";
    return 0;
  }
  std::cout << "peak:               " << gib(m->peak_bytes) << " (" << m->peak_bytes << " bytes)\n"
            << "  in:               " << m->peak_trace << ", statement " << m->peak_index << "\n"
            << "  statement:        " << m->peak_statement << "\n"
            << "inputs (held):      " << gib(m->input_bytes) << "\n"
            << "saved for backward: " << gib(m->saved_for_backward_bytes) << "\n";
  if (m->world_size > 1 || m->saved_replicated_bytes || m->saved_sharded_bytes || m->saved_per_rank_bytes) {
    std::cout << fmt::format("  by distribution:  replicated {}, sharded {}, per-rank {}", gib(m->saved_replicated_bytes),
                             gib(m->saved_sharded_bytes), gib(m->saved_per_rank_bytes));
    size_t unknown = m->saved_for_backward_bytes - m->saved_replicated_bytes - m->saved_sharded_bytes - m->saved_per_rank_bytes;
    if (unknown) std::cout << ", not known " << gib(unknown);
    std::cout << "\n";
  }
  if (m->world_size > 1 || m->comm_peak_bytes)
    std::cout << fmt::format("rank:               {} of {}\ncommunication:      {} at the peak, at most {} live\n", m->rank,
                             m->world_size, gib(m->peak_comm_bytes), gib(m->comm_peak_bytes));
  std::cout << "live at the peak (largest first):\n";
  size_t shown = 0, rest = 0;
  for (const auto& [name, bytes] : m->peak_live) {
    if (shown++ < 12) std::cout << fmt::format("  {:>12}  {}\n", gib(bytes), name);
    else rest += bytes;
  }
  if (shown > 12) std::cout << fmt::format("  {:>12}  ({} more)\n", gib(rest), shown - 12);
  size_t i = 0;
  for (const std::string& t : m->traces) {
    size_t n = 0, hi = 0;
    for (const auto& p : m->timeline)
      if (p.trace == static_cast<int>(i)) {
        ++n;
        hi = std::max(hi, p.live_bytes);
      }
    std::cout << "trace " << t << ": " << n << " statements, highest live after a statement " << gib(hi) << "\n";
    ++i;
  }
  return 0;
}

int cmd_check(const Common& c, bool parse_only) {
  tracer::Session s(session_options(c));
  for (const std::string& kv : c.sets) {
    size_t eq = kv.find('=');
    if (eq != std::string::npos) s.set(kv.substr(0, eq), kv.substr(eq + 1));
  }
  bool added = add_inputs(s, c);
  for (const std::string& f : c.ops_files) added = added && s.add_ops_file(f);
  if (!added) {
    std::cerr << s.rendered_diagnostics();
    return 1;
  }
  bool ok = s.check_file(c.file, parse_only, c.entry);
  std::cerr << s.rendered_diagnostics();
  return ok ? 0 : 1;
}

void add_common(CLI::App* app, Common& c, bool with_inputs) {
  app->add_option("file", c.file, "The .trace file")->required();
  app->add_option("--entry", c.entry, "The function to use (default: main, else the last function)");
  app->add_option("--set", c.sets, "Override a module-level value, e.g. --set T=64 (repeatable)");
  app->add_option("--ops", c.ops_files, "A .trace file whose public functions the program may call by name: a printout's custom ops (repeatable)");
  app->add_option("--world-size", c.world_size,
                  "Trace for a job of this many ranks without joining one (collectives' groups; under tracer launch: the job's)")
      ->check(CLI::Range(1, 1 << 20));
  app->add_option("--rank", c.world_rank, "With --world-size: trace as this rank (default 0)")->check(CLI::NonNegativeNumber);
  app->add_option("--step-limit", c.step_limit, "Stop scripts after this many statements and calls (0: no limit)");
  app->add_option("--memory-limit", c.memory_limit,
                  "Bytes the CPU may hold in tensors, and one list or string in the script (e.g. 8G, 512M; default 90% of RAM)")
      ->transform(CLI::AsSizeValue(false));
  if (with_inputs) {
    app->add_option("--passes", c.passes, "Comma-separated passes to apply after tracing, e.g. grad,del_last_used");
    app->add_option("--pass-file", c.pass_files, "A .trace file whose public functions become passes (repeatable)");
    app->add_flag("--verify", c.verify, "Run the IR verifier after every pass");
    app->add_option("--print-after", c.print_after, "Print the traces after this pass (repeatable; 'all')");
    app->add_flag("--time-passes", c.time_passes, "Report how long each pass took");
  }
  app->add_option("--input", c.inputs, "NAME=FILE.npy or FILE.safetensors (repeatable)");
  app->add_option("--type", c.types,
                  "NAME=TYPE: the type of an input drawn at random, e.g. --type x='f32[2, 3]' (repeatable)");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tracer: run, print and check Thunder-style traces"};
  app.require_subcommand(0, 1);
  app.set_version_flag("--version", fmt::format("tracer {}.{}.{}", TRACER_VERSION_MAJOR, TRACER_VERSION_MINOR, TRACER_VERSION_PATCH));
  app.footer("With no subcommand: the interactive REPL (docs/repl.md); :help there lists its commands.");
  Common c;
  std::string output_dir;
  bool parse_only = false;

  CLI::App* run = app.add_subcommand("run", "Run a script, or trace a function and run it (on the CPU unless --device); ARGS after -- are the script's argv");
  add_common(run, c, true);
  run->add_option("--seed", c.seed, "Seed for random inputs and random ops (default 0)");
  run->add_option("--output", output_dir, "Write each output as DIR/NAME.npy");
  // One directory per flag, so that `--allow-write DIR -- ARGS` ends at DIR.
  run->add_option("--allow-read", c.allow_read, "Let the script's load() read files below DIR (repeatable)")
      ->expected(1)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  run->add_option("--allow-write", c.allow_write, "Let the script's save() write files below DIR (repeatable)")
      ->expected(1)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  RunArgs ra;
  run->add_option("--device", ra.device, "cpu (default), cuda or cuda:N");
  run->add_option("--bench", ra.bench, "After the run, time N more runs and report median and spread")
      ->check(CLI::Range(0, 1000000));
  run->add_flag("--cuda-graph", ra.cuda_graph,
                "On a GPU: capture the program as one CUDA graph after a warm-up run and replay it");
  run->add_flag("--json", c.json, "Print a JSON report");

  CLI::App* print = app.add_subcommand("print", "Print the trace of a function");
  add_common(print, c, true);

  std::string plot;
  CLI::App* mem = app.add_subcommand("mem", "Estimate peak memory of the traces (nothing is executed)");
  add_common(mem, c, true);
  mem->add_flag("--json", c.json, "Print a JSON report with the timeline of live bytes");
  mem->add_option("--plot", plot, "Write an SVG chart of live bytes over the statements");
  std::string mem_device = "cpu";
  mem->add_option("--device", mem_device, "Count allocations as this device's allocator does: cpu (exact) or cuda (its granules)");

  CompileArgs ca;
  CLI::App* compile = app.add_subcommand("compile", "Generate the program's CUDA kernels (no GPU needed)");
  add_common(compile, c, true);
  compile->add_option("--arch", ca.arch, "GPU architecture (default sm_90)");
  compile->add_option("--emit", ca.emit, "What to write: cuda, ptx or cubin (default cubin)")
      ->check(CLI::IsMember({"cuda", "ptx", "cubin"}));
  compile->add_option("-o,--output", ca.out_dir, "Directory for the kernels (default FILE_STEM.kernels)");
  compile->add_flag("--json", c.json, "Print a JSON report");

  CLI::App* check = app.add_subcommand("check", "Report every diagnostic of a module without running it");
  add_common(check, c, false);
  check->add_flag("--parse-only", parse_only, "Stop after parsing");

  LaunchArgs la;
  CLI::App* launch = app.add_subcommand("launch", "Start the local ranks of a distributed job (as torchrun): tracer launch --nproc N -- run FILE ...");
  launch->add_option("--nproc", la.nproc, "Ranks on this machine (default 1)")->check(CLI::Range(1, 4096));
  launch->add_option("--nnodes", la.nnodes, "Machines in the job (default 1)")->check(CLI::Range(1, 65536));
  launch->add_option("--node-rank", la.node_rank, "This machine's place among them (default 0)")->check(CLI::NonNegativeNumber);
  launch->add_option("--master-addr", la.master_addr, "Where rank 0 serves the job's store (default 127.0.0.1)");
  launch->add_option("--master-port", la.master_port, "Its port (default: a free one on one machine, else 29500)")->check(CLI::Range(1, 65535));
  launch->add_option("--timeout", la.timeout_s, "Seconds a rank waits for the others (rendezvous, collectives; default 300)")
      ->check(CLI::PositiveNumber);
  launch->add_flag("--exec", la.exec, "Run the command as given (any program) instead of as a tracer subcommand");
  launch->add_option("command", la.command, "After '--': the tracer subcommand and its arguments (with --exec: a program)");

  // `tracer run FILE [options] -- ARGS`: what follows the first -- is the script's (its argv), not
  // tracer's; split off before parsing, since an option's values would otherwise run into it.
  int parsed_argc = argc;
  if (argc > 1 && std::string(argv[1]) == "run")
    for (int i = 2; i < argc; ++i)
      if (std::string(argv[i]) == "--") {
        c.script_args.assign(argv + i + 1, argv + argc);
        parsed_argc = i;
        break;
      }
  try {
    app.parse(parsed_argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (*launch) return cmd_launch(la);
  if (*run) return cmd_run(c, output_dir, ra);
  if (*print) return cmd_print(c);
  if (*check) return cmd_check(c, parse_only);
  if (*mem) return cmd_mem(c, plot, mem_device);
  if (*compile) return cmd_compile(c, ca);
  // No subcommand: the REPL (docs/repl.md).
  tracer::Session s(session_options(c));
  // Started by tracer launch: the REPL is a rank of the job, meeting the others at start and end.
  if (!s.join_job()) return fail(s);
  int rc = run_repl(s);
  return s.leave_job() ? rc : fail(s);
}
