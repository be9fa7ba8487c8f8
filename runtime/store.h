// The rendezvous of a distributed job, as torchrun does it (docs/distributed.md): rank 0 serves a
// small key-value store over TCP at MASTER_ADDR:MASTER_PORT, every rank (0 too) joins it as a
// client, and the ranks meet there before any collective: each announces itself, and every rank
// waits, up to a timeout, for all of them. The store then carries what the communicators need
// (NCCL's unique id, Gloo's addresses). Knows nothing of the language.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace tracer::rt::dist {

// Any failure of the store or the rendezvous: the message names what was waited for, where, and
// for how long.
struct StoreError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

using Millis = std::chrono::milliseconds;

// The store's server: one thread, every client on one poll loop. Values are bytes.
class StoreServer {
 public:
  // Listens on host:port (port 0: a free one, see port()). Throws StoreError when it cannot
  // (the port in use, the address not this machine's).
  static std::unique_ptr<StoreServer> start(const std::string& host, int port);
  ~StoreServer();  // stops the thread and closes every connection
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;
  int port() const { return port_; }

 private:
  StoreServer() = default;
  void serve();
  int listen_fd_ = -1, wake_[2] = {-1, -1}, port_ = 0;
  std::thread thread_;
};

// A connection to the store. One thread at a time.
class StoreClient {
 public:
  // Connects to host:port, retrying until timeout (rank 0 may not be listening yet). Throws
  // StoreError naming the address when the store is not there in time.
  static std::unique_ptr<StoreClient> connect(const std::string& host, int port, Millis timeout);
  ~StoreClient();
  StoreClient(const StoreClient&) = delete;
  StoreClient& operator=(const StoreClient&) = delete;

  void set(const std::string& key, const std::string& value);
  // The value of key, waiting up to timeout for some rank to set it; throws StoreError on timeout.
  std::string get(const std::string& key, Millis timeout);
  // The value now, if key is set.
  std::optional<std::string> try_get(const std::string& key);
  // Adds delta to the integer at key (0 when unset) and returns the sum: one atomic step.
  int64_t add(const std::string& key, int64_t delta);
  const std::string& address() const { return address_; }

 private:
  StoreClient() = default;
  std::string request(char op, const std::string& key, const std::string& value);
  int fd_ = -1;
  std::string address_;
};

// The job's place in the world, from torchrun's environment variables.
struct JobEnv {
  int rank = 0, world_size = 1, local_rank = 0, local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT; nullopt when RANK
  // and WORLD_SIZE are both unset (not a distributed run). Throws StoreError for values that
  // are not numbers or out of range (RANK >= WORLD_SIZE, a port outside 1..65535), naming them.
  static std::optional<JobEnv> from_env();
};

// The ranks meet: this rank announces itself ("rank/R") and waits, up to timeout, until all
// world_size have; a timeout names every rank that never arrived. A second join of the same
// store (the next generation of the same job) uses another prefix.
void join(StoreClient& store, const JobEnv& job, Millis timeout, const std::string& prefix = "rendezvous");

}  // namespace tracer::rt::dist
