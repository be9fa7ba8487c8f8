// `tracer launch`: one process per local rank, their output prefixed with the rank, all of them
// stopped as soon as one fails. Process management only: the rendezvous itself is the ranks'
// (they join the store rank 0 serves, runtime/store.h). See docs/distributed.md.
#include "launch.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace {

volatile sig_atomic_t g_signal = 0;
void on_signal(int s) { g_signal = s; }

// A free TCP port on this machine (bound to port 0 and released: another program could take it
// before rank 0 listens, as with torchrun's choice; the rank then reports the port in use).
int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 29500;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = 0;
  int port = 29500;
  socklen_t len = sizeof sa;
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 && getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0)
    port = ntohs(sa.sin_port);
  close(fd);
  return port;
}

std::string self_path() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "tracer";
  buf[n] = 0;
  return buf;
}

struct Rank {
  int rank = 0;
  pid_t pid = -1;
  int fd[2] = {-1, -1};     // its stdout and stderr, read here
  std::string partial[2];   // a line not yet ended
  bool exited = false;
  int status = 0;
};

// Writes each whole line of text, prefixed, to out; keeps the unfinished rest in partial.
void emit_lines(Rank& r, int which, const char* data, size_t n) {
  FILE* out = which == 0 ? stdout : stderr;
  std::string& p = r.partial[which];
  p.append(data, n);
  size_t start = 0;
  for (size_t nl; (nl = p.find('\n', start)) != std::string::npos; start = nl + 1)
    std::fprintf(out, "[rank %d] %.*s\n", r.rank, static_cast<int>(nl - start), p.data() + start);
  p.erase(0, start);
  std::fflush(out);
}

std::string describe(int status) {
  if (WIFSIGNALED(status)) return fmt::format("was killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  return fmt::format("exited with status {}", WEXITSTATUS(status));
}

int exit_code(int status) {
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

}  // namespace

int cmd_launch(const LaunchArgs& a) {
  if (a.command.empty()) {
    std::fprintf(stderr, "tracer launch: error: no command after '--' (for example: tracer launch --nproc 2 -- run FILE)\n");
    return 2;
  }
  if (a.node_rank < 0 || a.node_rank >= a.nnodes) {
    std::fprintf(stderr, "tracer launch: error: --node-rank %d is outside 0..%d (--nnodes %d)\n", a.node_rank, a.nnodes - 1, a.nnodes);
    return 2;
  }
  if (a.nnodes > 1 && a.master_port == 0 && a.master_addr == "127.0.0.1")
    std::fprintf(stderr, "tracer launch: note: --nnodes %d without --master-port: every node uses 29500\n", a.nnodes);
  const int port = a.master_port ? a.master_port : a.nnodes == 1 ? free_port() : 29500;
  const int world = a.nproc * a.nnodes;
  const std::string self = self_path();

  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  std::vector<Rank> ranks(static_cast<size_t>(a.nproc));
  for (int lr = 0; lr < a.nproc; ++lr) {
    Rank& r = ranks[static_cast<size_t>(lr)];
    r.rank = a.node_rank * a.nproc + lr;
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
      std::fprintf(stderr, "tracer launch: error: pipe: %s\n", std::strerror(errno));
      return 1;
    }
    std::fflush(stdout);
    std::fflush(stderr);
    // SIGINT and SIGTERM held across the fork: a rank stopped before its exec must not take the
    // launcher's handler (and so ignore the stop) but the default action, once set.
    sigset_t stop_sigs, old_mask;
    sigemptyset(&stop_sigs);
    sigaddset(&stop_sigs, SIGINT);
    sigaddset(&stop_sigs, SIGTERM);
    sigprocmask(SIG_BLOCK, &stop_sigs, &old_mask);
    pid_t pid = fork();
    if (pid != 0) sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    if (pid < 0) {
      std::fprintf(stderr, "tracer launch: error: fork: %s\n", std::strerror(errno));
      for (Rank& o : ranks)
        if (o.pid > 0) kill(o.pid, SIGKILL);
      return 1;
    }
    if (pid == 0) {
      signal(SIGINT, SIG_DFL);
      signal(SIGTERM, SIG_DFL);
      signal(SIGPIPE, SIG_DFL);
      sigprocmask(SIG_SETMASK, &old_mask, nullptr);
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // the ranks never outlive their launcher
      setpgid(0, 0);  // a group of its own: stopping a rank stops what it started too
      dup2(out[1], 1);
      dup2(err[1], 2);
      auto set = [](const char* k, const std::string& v) { setenv(k, v.c_str(), 1); };
      set("RANK", std::to_string(r.rank));
      set("WORLD_SIZE", std::to_string(world));
      set("LOCAL_RANK", std::to_string(lr));
      set("LOCAL_WORLD_SIZE", std::to_string(a.nproc));
      set("GROUP_RANK", std::to_string(a.node_rank));
      set("MASTER_ADDR", a.master_addr);
      set("MASTER_PORT", std::to_string(port));
      set("TRACER_DIST_TIMEOUT", fmt::format("{}", a.timeout_s));
      std::vector<std::string> argv_s;
      if (!a.exec) argv_s.push_back(self);
      argv_s.insert(argv_s.end(), a.command.begin(), a.command.end());
      std::vector<char*> argv;
      for (auto& s : argv_s) argv.push_back(s.data());
      argv.push_back(nullptr);
      if (a.exec)
        execvp(argv[0], argv.data());
      else
        execv(self.c_str(), argv.data());
      std::fprintf(stderr, "tracer launch: error: cannot run %s: %s\n", argv_s[0].c_str(), std::strerror(errno));
      _exit(127);
    }
    close(out[1]);
    close(err[1]);
    setpgid(pid, pid);  // (also here: the child may not have run yet when it is signalled)
    r.pid = pid;
    r.fd[0] = out[0];
    r.fd[1] = err[0];
  }

  int failed = -1, failed_status = 0;
  bool stopping = false;
  auto stop_deadline = std::chrono::steady_clock::now();
  auto stop_others = [&](int sig) {
    for (Rank& o : ranks)
      if (o.pid > 0) kill(-o.pid, sig);  // the rank's process group (what it started too)
  };
  bool killed_leftovers = false;
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<std::pair<size_t, int>> who;
    for (size_t k = 0; k < ranks.size(); ++k)
      for (int w = 0; w < 2; ++w)
        if (ranks[k].fd[w] >= 0) {
          fds.push_back({ranks[k].fd[w], POLLIN, 0});
          who.push_back({k, w});
        }
    bool all_exited = true;
    for (const Rank& r : ranks) all_exited = all_exited && r.exited;
    if (fds.empty() && all_exited) break;
    if (all_exited && !killed_leftovers) {
      // Every rank is gone: what still holds a pipe open is a process a rank left behind in its
      // group, which is stopped (once), so that the launcher ends when its ranks have.
      stop_others(SIGKILL);
      killed_leftovers = true;
    }
    int n = poll(fds.data(), fds.size(), all_exited ? 50 : 100);
    if (all_exited && n == 0) {
      // Nothing more came: the pipes are closed.
      for (Rank& r : ranks)
        for (int w = 0; w < 2; ++w)
          if (r.fd[w] >= 0) {
            if (!r.partial[w].empty()) emit_lines(r, w, "\n", 1);
            close(r.fd[w]);
            r.fd[w] = -1;
          }
      break;
    }
    if (n > 0) {
      for (size_t k = 0; k < fds.size(); ++k) {
        if (!(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        Rank& r = ranks[who[k].first];
        int w = who[k].second;
        char buf[65536];
        ssize_t got = read(r.fd[w], buf, sizeof buf);
        if (got > 0) {
          emit_lines(r, w, buf, static_cast<size_t>(got));
        } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
          if (!r.partial[w].empty()) emit_lines(r, w, "\n", 1);
          close(r.fd[w]);
          r.fd[w] = -1;
        }
      }
    }
    for (Rank& r : ranks) {
      if (r.exited) continue;
      int st = 0;
      if (waitpid(r.pid, &st, WNOHANG) != r.pid) continue;
      r.exited = true;
      r.status = st;
      if ((!WIFEXITED(st) || WEXITSTATUS(st) != 0) && failed < 0 && !stopping) {
        failed = r.rank, failed_status = st;
        std::fprintf(stderr, "tracer launch: rank %d %s; stopping the other ranks\n", r.rank, describe(st).c_str());
        std::fflush(stderr);
        stopping = true;
        stop_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        stop_others(SIGTERM);
      }
    }
    if (g_signal && !stopping) {
      std::fprintf(stderr, "tracer launch: %s; stopping the ranks\n", strsignal(g_signal));
      stopping = true;
      stop_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      stop_others(SIGTERM);
    }
    if (stopping && std::chrono::steady_clock::now() > stop_deadline) {
      stop_others(SIGKILL);  // a rank that ignored SIGTERM for 5 s
      stop_deadline = std::chrono::steady_clock::now() + std::chrono::hours(1);
    }
  }
  if (failed >= 0) return std::max(1, exit_code(failed_status));
  if (g_signal) return 128 + g_signal;
  return 0;
}
