// The rendezvous store (runtime/store.h): ranks as threads of one process, each with its own TCP
// connection, and as forked processes; the failures a job meets (a rank that never arrives, a
// wrong WORLD_SIZE, two processes with one RANK, a port in use, rank 0 gone, bad variables).
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <thread>

#include "runtime/store.h"
#include "tests/runtime/store_process.h"

namespace tracer::test {
namespace {
using namespace rt::dist;
using std::chrono::milliseconds;

struct EnvGuard {  // sets variables for one test, and restores them
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
  void set(const char* k, const char* v) {
    const char* old = std::getenv(k);
    saved.push_back({k, old ? std::optional<std::string>(old) : std::nullopt});
    if (v) setenv(k, v, 1);
    else unsetenv(k);
  }
  ~EnvGuard() {
    for (auto it = saved.rbegin(); it != saved.rend(); ++it) {
      if (it->second) setenv(it->first.c_str(), it->second->c_str(), 1);
      else unsetenv(it->first.c_str());
    }
  }
};
}  // namespace

TEST_CASE("store: set, get, add and waiting for a key across connections", "[runtime][dist]") {
  auto server = StoreServer::start("127.0.0.1", 0);
  REQUIRE(server->port() > 0);
  auto a = StoreClient::connect("127.0.0.1", server->port(), milliseconds(2000));
  auto b = StoreClient::connect("127.0.0.1", server->port(), milliseconds(2000));
  CHECK(!a->try_get("x"));
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131 % 251);  // bytes, zeros included
  a->set("x", big);
  CHECK(b->get("x", milliseconds(100)) == big);
  CHECK(a->add("n", 5) == 5);
  CHECK(b->add("n", -2) == 3);
  // A get waits for a later set by another client.
  std::thread later([&] {
    std::this_thread::sleep_for(milliseconds(50));
    a->set("late", "here");
  });
  CHECK(b->get("late", milliseconds(3000)) == "here");
  later.join();
  // ... and gives up at its deadline, naming the key.
  auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(b->get("never", milliseconds(150)), Catch::Contains("'never' was not set") && Catch::Contains("within 0.15 s"));
  CHECK(std::chrono::steady_clock::now() - t0 < milliseconds(1500));
  // Many concurrent adds are atomic.
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t)
    ts.emplace_back([&] {
      auto c = StoreClient::connect("127.0.0.1", server->port(), milliseconds(2000));
      for (int i = 0; i < 50; ++i) c->add("count", 1);
    });
  for (auto& t : ts) t.join();
  CHECK(a->add("count", 0) == 400);
}

TEST_CASE("store: the ranks of a job meet, and every failure names what is missing", "[runtime][dist]") {
  auto server = StoreServer::start("127.0.0.1", 0);
  const int port = server->port();
  SECTION("four ranks, as threads") {
    std::atomic<int> ok{0};
    std::vector<std::thread> ts;
    for (int r = 0; r < 4; ++r)
      ts.emplace_back([&, r] {
        auto c = StoreClient::connect("127.0.0.1", port, milliseconds(2000));
        JobEnv j;
        j.rank = r;
        j.world_size = 4;
        join(*c, j, milliseconds(5000));
        ok++;
      });
    for (auto& t : ts) t.join();
    CHECK(ok == 4);
  }
  SECTION("a rank that never arrives: the others stop within the timeout, naming it") {
    std::vector<std::string> errors(2);
    std::vector<std::thread> ts;
    for (int r : {0, 2})
      ts.emplace_back([&, r] {
        auto c = StoreClient::connect("127.0.0.1", port, milliseconds(2000));
        JobEnv j;
        j.rank = r;
        j.world_size = 3;
        try {
          join(*c, j, milliseconds(300));
        } catch (const StoreError& e) {
          errors[r / 2] = e.what();
        }
      });
    for (auto& t : ts) t.join();
    for (const auto& e : errors) CHECK_THAT(e, Catch::Contains("rank 1 of 3 never arrived within 0.3 s"));
  }
  SECTION("a wrong WORLD_SIZE, and two processes with one RANK") {
    auto c0 = StoreClient::connect("127.0.0.1", port, milliseconds(2000));
    auto c1 = StoreClient::connect("127.0.0.1", port, milliseconds(2000));
    JobEnv j0, j1;
    j0.world_size = 2;
    j1.rank = 1;
    j1.world_size = 3;
    std::thread t([&] { CHECK_THROWS_WITH(join(*c1, j1, milliseconds(2000), "g"), Catch::Contains("WORLD_SIZE")); });
    CHECK_THROWS_WITH(join(*c0, j0, milliseconds(2000), "g"), Catch::Contains("WORLD_SIZE"));
    t.join();
    auto c2 = StoreClient::connect("127.0.0.1", port, milliseconds(2000));
    CHECK_THROWS_WITH(join(*c2, j0, milliseconds(200), "g"), Catch::Contains("already joined as RANK=0"));
  }
}

TEST_CASE("store: ranks as processes, a port in use, and rank 0 gone", "[runtime][dist]") {
  StoreProcess server;  // (this process forks the ranks: it runs no thread of its own)
  const int port = server.port();
  // Three forked ranks join with rank 0's store in this process; each exits 0 on success.
  std::vector<pid_t> kids = fork_ranks({1, 2, 3}, [&](int r) {
    auto c = StoreClient::connect("127.0.0.1", port, milliseconds(5000));
    JobEnv j;
    j.rank = r;
    j.world_size = 4;
    join(*c, j, milliseconds(10000));
    c->set("hello/" + std::to_string(r), "from " + std::to_string(getpid()));
    return false;
  });
  auto c = StoreClient::connect("127.0.0.1", port, milliseconds(2000));
  JobEnv j;
  j.world_size = 4;
  join(*c, j, milliseconds(10000));
  for (int code : wait_ranks(kids)) CHECK(code == 0);
  for (int r = 1; r < 4; ++r) CHECK_THAT(c->get("hello/" + std::to_string(r), milliseconds(1000)), Catch::StartsWith("from "));
  // The port in use: a second server there fails with the reason and what to do.
  CHECK_THROWS_WITH(StoreServer::start("127.0.0.1", port), Catch::Contains("cannot listen on 127.0.0.1:" + std::to_string(port)) &&
                                                             Catch::Contains("MASTER_PORT"));
  // Rank 0 gone: the next request says so.
  server.stop();
  CHECK_THROWS_WITH(c->set("k", "v"), Catch::Contains("closed the connection"));
  // No store at all: connect gives up at its deadline, naming the address.
  CHECK_THROWS_WITH(StoreClient::connect("127.0.0.1", port, milliseconds(100)), Catch::Contains("no store at 127.0.0.1:" + std::to_string(port)));
}

TEST_CASE("store: the job's variables as torchrun sets them, and their errors", "[runtime][dist]") {
  EnvGuard g;
  for (const char* k : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"}) g.set(k, nullptr);
  CHECK(!JobEnv::from_env());
  g.set("RANK", "3");
  g.set("WORLD_SIZE", "4");
  g.set("LOCAL_WORLD_SIZE", "2");
  g.set("MASTER_ADDR", "10.0.0.7");
  g.set("MASTER_PORT", "29611");
  auto j = JobEnv::from_env();
  REQUIRE(j);
  CHECK(j->rank == 3);
  CHECK(j->world_size == 4);
  CHECK(j->local_rank == 1);  // RANK % LOCAL_WORLD_SIZE when LOCAL_RANK is unset
  CHECK(j->master_addr == "10.0.0.7");
  CHECK(j->master_port == 29611);
  g.set("RANK", "4");
  CHECK_THROWS_WITH(JobEnv::from_env(), Catch::Contains("RANK='4' is not a number in 0..3"));
  g.set("RANK", "x1");
  CHECK_THROWS_WITH(JobEnv::from_env(), Catch::Contains("RANK='x1'"));
  g.set("RANK", "0");
  g.set("MASTER_PORT", "70000");
  CHECK_THROWS_WITH(JobEnv::from_env(), Catch::Contains("MASTER_PORT='70000'"));
  g.set("MASTER_PORT", "29611");
  g.set("WORLD_SIZE", nullptr);
  CHECK_THROWS_WITH(JobEnv::from_env(), Catch::Contains("WORLD_SIZE is not set"));
}

}  // namespace tracer::test
