// The REPL: `tracer` with no arguments. Line editing and history through libedit; statements run
// in one module that grows chunk by chunk; expressions print their value. Uses only the public
// API (tracer/session.h). docs/repl.md describes it.
#include "repl.h"

#include <editline/readline.h>
#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "tracer/session.h"

namespace {

std::atomic<tracer::Session*> g_session{nullptr};  // for the SIGINT handler
volatile sig_atomic_t g_interrupted = 0;
volatile sig_atomic_t g_running = 0;  // a chunk or command is running (not reading a line)

void on_sigint(int) {
  g_interrupted = 1;
  if (!g_running) return;  // at the prompt: the line being typed is dropped
  if (tracer::Session* s = g_session.load()) s->interrupt();  // async-signal-safe: sets a flag
}

// Runs job() with Ctrl-C interrupting it (the SIGINT handler interrupts only while code runs).
template <class F> auto interruptible(F job) {
  struct Running {
    Running() {
      g_interrupted = 0;
      g_running = 1;
    }
    ~Running() { g_running = 0; }
  } running;
  return job();
}

// Tab completion: names from the session (and the commands after ':'), one by one as libedit's
// generator protocol asks.
std::vector<std::string> g_matches;
const char* const kCommandNames[] = {":help", ":load", ":trace", ":passes", ":print", ":mem", ":run", ":quit"};

char* complete_next(const char* text, int state) {
  if (state == 0) {
    g_matches.clear();
    std::string t = text;
    if (!t.empty() && t[0] == ':') {
      for (const char* c : kCommandNames)
        if (std::string(c).rfind(t, 0) == 0) g_matches.push_back(c);
    } else if (tracer::Session* s = g_session.load()) {
      g_matches = s->completions(t);
    }
  }
  if (static_cast<size_t>(state) >= g_matches.size()) return nullptr;
  return strdup(g_matches[static_cast<size_t>(state)].c_str());  // libedit frees it
}

char** complete(const char* text, int start, int end) {
  (void)start, (void)end;
  return rl_completion_matches(text, complete_next);
}

const char* kCommands =
    "Commands:\n"
    "  :help [NAME]        this list, or the documentation of an op, builtin, native, pass or function\n"
    "  :load FILE          run a .trace file here (its definitions join the session)\n"
    "  :trace F [TYPE...]  trace function F (TYPEs for its parameters in order, e.g. f32[4, 8]) and print it\n"
    "  :passes [P,Q]       set the passes :print, :mem and :run apply (none: show them)\n"
    "  :print              print the traced function after the passes\n"
    "  :mem                estimate its peak memory\n"
    "  :run                run it on random inputs and print the outputs\n"
    "  :quit               leave (Ctrl-D too)\n"
    "Anything else is code: statements run, expressions print their value. A line ending in ':'\n"
    "(def, for, if, ...) continues until a blank line.\n";

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// Whether `text` so far needs more lines: an open bracket or string, or a block opened by a
// line ending in ':' (which then ends at a blank line).
bool needs_more(const std::string& text, bool* block) {
  int depth = 0;
  char quote = 0;
  bool triple = false;
  std::string last_code_line;
  std::string line;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (quote) {
      if (c == '\\') {
        ++i;
        continue;
      }
      if (triple && c == quote && text.compare(i, 3, std::string(3, quote)) == 0) {
        quote = 0;
        i += 2;
      } else if (!triple && c == quote) {
        quote = 0;
      } else if (!triple && c == '\n') {
        quote = 0;  // an unterminated string: the parser will say so
      }
      continue;
    }
    if (c == '#') {
      while (i < text.size() && text[i] != '\n') ++i;
      --i;
      continue;
    }
    if (c == '"' || c == '\'') {
      quote = c;
      triple = text.compare(i, 3, std::string(3, c)) == 0;
      if (triple) i += 2;
      continue;
    }
    if (c == '(' || c == '[' || c == '{') ++depth;
    if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
    if (c == '\n') {
      if (!trim(line).empty()) last_code_line = trim(line);
      line.clear();
    } else {
      line += c;
    }
  }
  if (!trim(line).empty()) last_code_line = trim(line);
  if (!last_code_line.empty() && last_code_line.back() == ':') *block = true;
  if (text.rfind("@", 0) == 0) *block = true;  // a decorator: its def follows
  return depth > 0 || (quote && triple) || (!last_code_line.empty() && last_code_line.back() == '\\');
}

class Repl {
 public:
  Repl(tracer::Session& s, bool interactive) : s_(s), interactive_(interactive) {}

  int run() {
    if (interactive_) {
      std::cout << "tracer: Thunder-style traces. :help for commands, Ctrl-D to leave.\n";
      history_ = history_path();
      using_history();
      stifle_history(2000);
      rl_attempted_completion_function = complete;
      rl_basic_word_break_characters = " \t\n\"\\'`@$><=;|&{(,[+-*/%";
      if (!history_.empty()) read_history(history_.c_str());
    }
    int status = 0;
    for (;;) {
      std::string chunk;
      if (!read_chunk(&chunk)) break;
      std::string t = trim(chunk);
      if (t.empty()) continue;
      if (t[0] == ':') {
        if (!command(t, &status)) break;
      } else {
        eval(chunk);
      }
    }
    if (interactive_) {
      std::cout << "\n";
      if (!history_.empty()) write_history(history_.c_str());
    }
    return status ? status : (!interactive_ && failed_) ? 1 : 0;
  }

 private:
  tracer::Session& s_;
  bool interactive_;
  std::string history_;
  bool failed_ = false;  // an error was reported (piped input then exits with 1)
  std::string entry_;  // the function :trace chose
  int chunks_ = 0;

  static std::string history_path() {
    if (const char* h = std::getenv("TRACER_HISTORY")) return h;
    if (const char* home = std::getenv("HOME")) return std::string(home) + "/.tracer_history";
    return "";
  }

  // One line; false at the end of input. Ctrl-C while typing drops the line (*cancel).
  bool read_line(const char* prompt, std::string* out, bool* cancel) {
    *cancel = false;
    if (!interactive_) {
      if (!std::getline(std::cin, *out)) return false;
      return true;
    }
    g_interrupted = 0;
    char* l = readline(prompt);
    if (!l) {
      if (g_interrupted) {
        g_interrupted = 0;
        *cancel = true;
        std::cout << "\n";
        return true;
      }
      return false;
    }
    *out = l;
    std::free(l);
    if (g_interrupted) {  // Ctrl-C: libedit returns what was typed; drop it
      g_interrupted = 0;
      *cancel = true;
    }
    return true;
  }

  bool read_chunk(std::string* chunk) {
    std::string line;
    bool cancel = false;
    if (!read_line(">>> ", &line, &cancel)) return false;
    if (cancel) return true;
    *chunk = line;
    bool block = false;
    if (trim(line).rfind(":", 0) == 0) {  // a command: one line
      remember(line);
      return true;
    }
    bool in_block = false;
    for (;;) {
      block = false;
      bool open = needs_more(*chunk, &block);
      in_block = in_block || block;
      if (!open && !in_block) break;
      if (!read_line("... ", &line, &cancel)) break;
      if (cancel) {
        chunk->clear();
        return true;
      }
      if (!open && trim(line).empty()) break;  // a blank line ends the block
      *chunk += "\n" + line;
    }
    remember(*chunk);
    return true;
  }

  void remember(const std::string& chunk) {
    if (interactive_ && !trim(chunk).empty()) add_history(chunk.c_str());
  }

  void report_errors() {
    bool error = false;
    for (const auto& d : s_.diagnostics()) error = error || d.severity == "error";
    if (error) failed_ = true;
    std::cerr << s_.rendered_diagnostics();
    s_.clear_diagnostics();
  }

  void eval(const std::string& chunk) {
    std::string shown;
    std::string name = fmt::format("<repl {}>", ++chunks_);
    bool ok = interruptible([&] { return s_.eval(name, chunk, &shown); });
    if (!ok) {
      report_errors();
      return;
    }
    if (!s_.diagnostics().empty()) report_errors();  // warnings
    if (!shown.empty()) std::cout << shown << (shown.back() == '\n' ? "" : "\n");
    std::cout << std::flush;
  }

  bool need_entry() {
    if (!entry_.empty()) return true;
    std::cerr << "no function traced yet: :trace F first\n";
    failed_ = true;
    return false;
  }

  // Runs a command; false to leave.
  bool command(const std::string& line, int* status) {
    std::istringstream in(line.substr(1));
    std::string cmd;
    in >> cmd;
    std::string rest;
    std::getline(in, rest);
    rest = trim(rest);
    if (cmd == "quit" || cmd == "q" || cmd == "exit") return false;
    if (cmd == "help" || cmd == "h") {
      if (rest.empty()) {
        std::cout << kCommands;
        return true;
      }
      auto doc = s_.help(rest);
      if (!doc) {
        std::cerr << "no op, builtin, native, pass or function named '" << rest << "'\n";
        failed_ = true;
      }
      else std::cout << *doc << (doc->empty() || doc->back() != '\n' ? "\n" : "");
      return true;
    }
    if (cmd == "load") {
      std::ifstream f(rest);
      if (rest.empty() || !f) {
        std::cerr << "cannot read '" << rest << "'\n";
        failed_ = true;
        return true;
      }
      std::stringstream ss;
      ss << f.rdbuf();
      std::string shown;
      bool ok = interruptible([&] { return s_.eval(rest, ss.str(), &shown); });
      if (!ok) report_errors();
      else std::cout << "loaded " << rest << "\n";
      return true;
    }
    if (cmd == "trace") {
      std::istringstream args(rest);
      std::string fn;
      args >> fn;
      if (fn.empty()) {
        std::cerr << "usage: :trace F [TYPE...]   e.g. :trace f f32[4, 8] f32[8]\n";
        failed_ = true;
        return true;
      }
      std::vector<std::string> types;
      std::string rest_types;
      std::getline(args, rest_types);
      // Types are separated by spaces outside brackets: f32[4, 8] f32[8]
      std::string cur;
      int depth = 0;
      for (char c : rest_types) {
        if (c == '[') ++depth;
        if (c == ']') --depth;
        if (c == ' ' && depth == 0) {
          if (!cur.empty()) types.push_back(cur);
          cur.clear();
        } else {
          cur += c;
        }
      }
      if (!cur.empty()) types.push_back(cur);
      auto params = s_.parameters(fn);
      if (!params) {
        report_errors();
        return true;
      }
      if (types.size() > params->size()) {
        std::cerr << fn << " has " << params->size() << " parameters, got " << types.size() << " types\n";
        failed_ = true;
        return true;
      }
      s_.clear_input_types();
      for (size_t i = 0; i < types.size(); ++i)
        if (!s_.set_input_type((*params)[i], types[i])) {
          report_errors();
          return true;
        }
      entry_ = fn;
      print_entry();
      return true;
    }
    if (cmd == "passes") {
      if (rest.empty()) {
        std::cout << "passes: " << (passes_.empty() ? "(none)" : passes_) << "\n";
        return true;
      }
      std::vector<std::string> ps = tracer::split_passes(rest);
      if (s_.set_passes(ps)) passes_ = rest;
      else report_errors();
      return true;
    }
    if (cmd == "print") {
      if (need_entry()) print_entry();
      return true;
    }
    if (cmd == "mem") {
      if (!need_entry()) return true;
      auto m = interruptible([&] { return s_.memory(entry_); });
      if (!m) {
        report_errors();
        return true;
      }
      std::cout << fmt::format("peak {:.2f} MiB in {} at statement {}: {}\n", m->peak_bytes / 1048576.0, m->peak_trace,
                               m->peak_index, m->peak_statement);
      for (size_t i = 0; i < m->peak_live.size() && i < 5; ++i)
        std::cout << fmt::format("  {:>10.2f} MiB  {}\n", m->peak_live[i].second / 1048576.0, m->peak_live[i].first);
      return true;
    }
    if (cmd == "run") {
      if (!need_entry()) return true;
      auto r = interruptible([&] { return s_.run(entry_); });
      if (!r) {
        report_errors();
        return true;
      }
      for (const auto& o : r->outputs) std::cout << o.name << ": " << o.summary << "\n";
      std::cout << fmt::format("# ran in {:.1f} ms, peak {:.2f} MiB\n", r->run_ms, r->peak_bytes / 1048576.0);
      return true;
    }
    std::cerr << "unknown command ':" << cmd << "' (:help lists them)\n";
    failed_ = true;
    (void)status;
    return true;
  }

  void print_entry() {
    auto text = interruptible([&] { return s_.print(entry_); });
    if (!text) report_errors();
    else std::cout << *text;
  }

  std::string passes_;
};

}  // namespace

int run_repl(tracer::Session& s) {
  bool interactive = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
  if (!interactive) return Repl(s, false).run();  // piped: Ctrl-C ends the process, as for any filter
  g_session = &s;
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a read in progress returns
  struct sigaction old {};
  sigaction(SIGINT, &sa, &old);
  int rc = Repl(s, true).run();
  sigaction(SIGINT, &old, nullptr);
  g_session = nullptr;
  return rc;
}
