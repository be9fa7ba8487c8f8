// A rendezvous store served by a process of its own, for tests that fork ranks: a process must
// not fork while another of its threads runs (the child can inherit a lock that thread held, an
// allocator's under ASan: a 4-rank test hung so in CI), and the server is a thread.
#pragma once
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <stdexcept>
#include <vector>

#include "runtime/store.h"

namespace tracer::test {

class StoreProcess {
 public:
  StoreProcess() {
    int ready[2], stop[2];
    if (pipe(ready) != 0 || pipe(stop) != 0) throw std::runtime_error("pipe");
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork");
    if (pid_ == 0) {
      alarm(600);  // never outlives a hung test by much
      close(ready[0]);
      close(stop[1]);
      int port = -1;
      std::unique_ptr<rt::dist::StoreServer> server;
      try {
        server = rt::dist::StoreServer::start("127.0.0.1", 0);
        port = server->port();
      } catch (...) {
      }
      (void)!write(ready[1], &port, sizeof port);
      char c;
      while (read(stop[0], &c, 1) > 0) {
      }  // until the test closes its end (or exits)
      server.reset();
      _exit(0);
    }
    close(ready[1]);
    close(stop[0]);
    stop_ = stop[1];
    if (read(ready[0], &port_, sizeof port_) != sizeof port_ || port_ <= 0) port_ = -1;
    close(ready[0]);
    if (port_ <= 0) throw std::runtime_error("the store process did not start");
  }
  ~StoreProcess() { stop(); }
  int port() const { return port_; }
  // Ends the server (rank 0 gone).
  void stop() {
    if (pid_ <= 0) return;
    close(stop_);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int stop_ = -1, port_ = -1;
};

// Forks one process per rank in ranks; each runs failed(rank) and exits 0 when it returns
// false, 1 when true, 2 on an exception (printed with the rank). A rank that hangs dies after
// 120 s, so the test fails instead of hanging. Call from a process that runs no other thread.
template <class F>
std::vector<pid_t> fork_ranks(const std::vector<int>& ranks, F failed) {
  std::vector<pid_t> kids;
  for (int r : ranks) {
    pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("fork");
    if (pid == 0) {
      alarm(120);
      int rc = 99;
      try {
        rc = failed(r) ? 1 : 0;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", r, e.what());
        rc = 2;
      }
      std::fflush(stderr);
      _exit(rc);
    }
    kids.push_back(pid);
  }
  return kids;
}

// Waits for forked ranks: their exit codes (100 + the signal for a rank killed by one).
inline std::vector<int> wait_ranks(const std::vector<pid_t>& kids) {
  std::vector<int> codes;
  for (pid_t pid : kids) {
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) throw std::runtime_error("waitpid");
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status));
  }
  return codes;
}

}  // namespace tracer::test
