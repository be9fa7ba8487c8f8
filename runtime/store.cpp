// The rendezvous store over TCP (store.h; docs/distributed.md, "The store"). A request is one
// byte of operation, then the key and the value, each a 32-bit length (network order) and its
// bytes; a reply is one byte of status (0 found, 1 missing) and a length-prefixed value. Gets do
// not block in the server: a client waiting for a key asks again, with a growing pause, until
// its own deadline, so a client that gives up leaves nothing pending behind it.
#include "runtime/store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <unordered_map>

namespace tracer::rt::dist {
namespace {

constexpr size_t kMaxField = size_t{64} << 20;  // a key or value above 64 MiB is refused

std::string errno_text() { return std::strerror(errno); }

std::string seconds(Millis t) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g s", static_cast<double>(t.count()) / 1000.0);
  return buf;
}

// The addresses of host:port (numeric or a name), for connect or bind.
addrinfo* resolve(const std::string& host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const std::string p = std::to_string(port);
  int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), p.c_str(), &hints, &res);
  if (rc != 0) throw StoreError("store: cannot resolve '" + host + "': " + gai_strerror(rc));
  return res;
}

void put_u32(std::string& out, uint32_t v) {
  uint32_t n = htonl(v);
  out.append(reinterpret_cast<const char*>(&n), 4);
}

uint32_t get_u32(const char* p) {
  uint32_t n;
  std::memcpy(&n, p, 4);
  return ntohl(n);
}

bool send_all(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

bool recv_all(int fd, char* out, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::recv(fd, out + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    got += static_cast<size_t>(r);
  }
  return true;
}

}  // namespace

// ---- server ----

std::unique_ptr<StoreServer> StoreServer::start(const std::string& host, int port) {
  if (port < 0 || port > 65535) throw StoreError("store: port " + std::to_string(port) + " is outside 0..65535");
  std::unique_ptr<StoreServer> s(new StoreServer());
  addrinfo* res = resolve(host, port, true);
  std::string why = "no address";
  for (addrinfo* a = res; a; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      why = errno_text();
      continue;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // a restarted job may reuse the port at once
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 1024) == 0) {
      s->listen_fd_ = fd;
      break;
    }
    why = errno_text();
    ::close(fd);
  }
  freeaddrinfo(res);
  if (s->listen_fd_ < 0)
    throw StoreError("store: cannot listen on " + host + ":" + std::to_string(port) + ": " + why +
                     (why == std::strerror(EADDRINUSE) ? " (another job, or a rank 0 still running, holds it: set MASTER_PORT)" : ""));
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  getsockname(s->listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  s->port_ = ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                                              : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  if (::pipe2(s->wake_, O_CLOEXEC) != 0) throw StoreError("store: pipe: " + errno_text());
  s->thread_ = std::thread([srv = s.get()] { srv->serve(); });
  return s;
}

StoreServer::~StoreServer() {
  if (wake_[1] >= 0) {
    char c = 1;
    (void)!::write(wake_[1], &c, 1);
  }
  if (thread_.joinable()) thread_.join();
  for (int fd : {listen_fd_, wake_[0], wake_[1]})
    if (fd >= 0) ::close(fd);
}

void StoreServer::serve() {
  std::unordered_map<std::string, std::string> data;
  std::map<int, std::string> inbox;  // client fd -> bytes received, not yet a whole request
  auto drop = [&](int fd) {
    ::close(fd);
    inbox.erase(fd);
  };
  for (;;) {
    std::vector<pollfd> fds = {{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    for (const auto& [fd, buf] : inbox) fds.push_back({fd, POLLIN, 0});
    int n = ::poll(fds.data(), fds.size(), -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || (fds[0].revents & POLLIN)) break;
    if (fds[1].revents & POLLIN) {
      int c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c >= 0) {
        int one = 1;
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        inbox[c];
      }
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      const int fd = fds[i].fd;
      char buf[65536];
      ssize_t r = ::recv(fd, buf, sizeof buf, 0);
      if (r <= 0) {
        if (r < 0 && errno == EINTR) continue;
        drop(fd);
        continue;
      }
      std::string& in = inbox[fd];
      in.append(buf, static_cast<size_t>(r));
      // Every whole request in the buffer, in order.
      bool bad = false;
      for (;;) {
        if (in.size() < 5) break;
        const uint32_t klen = get_u32(in.data() + 1);
        if (klen > kMaxField) { bad = true; break; }
        if (in.size() < 5 + size_t{klen} + 4) break;
        const uint32_t vlen = get_u32(in.data() + 5 + klen);
        if (vlen > kMaxField) { bad = true; break; }
        const size_t whole = 5 + size_t{klen} + 4 + vlen;
        if (in.size() < whole) break;
        const char op = in[0];
        std::string key = in.substr(5, klen), value = in.substr(9 + klen, vlen);
        in.erase(0, whole);
        std::string reply;
        if (op == 'S') {
          data[key] = std::move(value);
          reply.push_back(0);
          put_u32(reply, 0);
        } else if (op == 'G') {
          auto it = data.find(key);
          reply.push_back(it == data.end() ? 1 : 0);
          put_u32(reply, it == data.end() ? 0 : static_cast<uint32_t>(it->second.size()));
          if (it != data.end()) reply += it->second;
        } else if (op == 'A') {
          int64_t sum = std::strtoll(value.c_str(), nullptr, 10);
          auto it = data.find(key);
          if (it != data.end()) sum += std::strtoll(it->second.c_str(), nullptr, 10);
          data[key] = std::to_string(sum);
          reply.push_back(0);
          put_u32(reply, static_cast<uint32_t>(data[key].size()));
          reply += data[key];
        } else {
          bad = true;
          break;
        }
        if (!send_all(fd, reply)) { bad = true; break; }
      }
      if (bad) drop(fd);  // not our protocol, or gone: the connection ends, the store stays
    }
  }
  for (auto& [fd, buf] : inbox) ::close(fd);
}

// ---- client ----

std::unique_ptr<StoreClient> StoreClient::connect(const std::string& host, int port, Millis timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_ptr<StoreClient> c(new StoreClient());
  c->address_ = host + ":" + std::to_string(port);
  std::string why;
  Millis pause{5};
  for (;;) {
    addrinfo* res = resolve(host, port, false);
    for (addrinfo* a = res; a && c->fd_ < 0; a = a->ai_next) {
      int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) {
        why = errno_text();
        continue;
      }
      if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        c->fd_ = fd;
      } else {
        why = errno_text();
        ::close(fd);
      }
    }
    freeaddrinfo(res);
    if (c->fd_ >= 0) return c;
    if (std::chrono::steady_clock::now() + pause > deadline)
      throw StoreError("store: no store at " + c->address_ + " within " + seconds(timeout) + " (" + why +
                       "): is rank 0 running, and MASTER_ADDR and MASTER_PORT the same on every rank?");
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, Millis{200});
  }
}

StoreClient::~StoreClient() {
  if (fd_ >= 0) ::close(fd_);
}

std::string StoreClient::request(char op, const std::string& key, const std::string& value) {
  if (key.size() > kMaxField || value.size() > kMaxField) throw StoreError("store: a key or value above 64 MiB");
  std::string msg(1, op);
  put_u32(msg, static_cast<uint32_t>(key.size()));
  msg += key;
  put_u32(msg, static_cast<uint32_t>(value.size()));
  msg += value;
  char head[5];
  if (!send_all(fd_, msg) || !recv_all(fd_, head, 5))
    throw StoreError("store: the store at " + address_ + " closed the connection (did rank 0 exit?)");
  const uint32_t len = get_u32(head + 1);
  if (len > kMaxField) throw StoreError("store: a malformed reply from " + address_);
  std::string out(len, '\0');
  if (len && !recv_all(fd_, out.data(), len))
    throw StoreError("store: the store at " + address_ + " closed the connection (did rank 0 exit?)");
  if (head[0] == 1) throw std::out_of_range(key);
  return out;
}

void StoreClient::set(const std::string& key, const std::string& value) { request('S', key, value); }

std::optional<std::string> StoreClient::try_get(const std::string& key) {
  try {
    return request('G', key, "");
  } catch (const std::out_of_range&) {
    return std::nullopt;
  }
}

std::string StoreClient::get(const std::string& key, Millis timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  Millis pause{1};
  for (;;) {
    if (auto v = try_get(key)) return *v;
    if (std::chrono::steady_clock::now() >= deadline)
      throw StoreError("store: '" + key + "' was not set at " + address_ + " within " + seconds(timeout));
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, Millis{50});
  }
}

int64_t StoreClient::add(const std::string& key, int64_t delta) {
  return std::strtoll(request('A', key, std::to_string(delta)).c_str(), nullptr, 10);
}

// ---- the job ----

std::optional<JobEnv> JobEnv::from_env() {
  auto var = [](const char* name) -> const char* {
    const char* v = std::getenv(name);
    return v && *v ? v : nullptr;
  };
  if (!var("RANK") && !var("WORLD_SIZE")) return std::nullopt;
  auto number = [&](const char* name, int fallback, bool required, long lo, long hi) {
    const char* v = var(name);
    if (!v) {
      if (required) throw StoreError(std::string("distributed: ") + name + " is not set (RANK and WORLD_SIZE go together)");
      return fallback;
    }
    char* end = nullptr;
    errno = 0;
    long n = std::strtol(v, &end, 10);
    if (errno || end == v || *end || n < lo || n > hi)
      throw StoreError(std::string("distributed: ") + name + "='" + v + "' is not a number in " + std::to_string(lo) + ".." + std::to_string(hi));
    return static_cast<int>(n);
  };
  JobEnv j;
  j.world_size = number("WORLD_SIZE", 1, true, 1, 1 << 20);
  j.rank = number("RANK", 0, true, 0, j.world_size - 1);
  j.local_world_size = number("LOCAL_WORLD_SIZE", j.world_size, false, 1, j.world_size);
  j.local_rank = number("LOCAL_RANK", j.rank % j.local_world_size, false, 0, j.local_world_size - 1);
  if (const char* a = var("MASTER_ADDR")) j.master_addr = a;
  j.master_port = number("MASTER_PORT", 29500, false, 1, 65535);
  return j;
}

void join(StoreClient& store, const JobEnv& job, Millis timeout, const std::string& prefix) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const std::string me = std::to_string(job.rank);
  if (store.add(prefix + "/claims/" + me, 1) > 1)
    throw StoreError("rendezvous at " + store.address() + ": another process already joined as RANK=" + me);
  store.set(prefix + "/rank/" + me, std::to_string(job.world_size));
  std::vector<int> missing;
  for (int r = 0; r < job.world_size; ++r) missing.push_back(r);
  Millis pause{1};
  for (;;) {
    std::vector<int> still;
    for (int r : missing) {
      auto v = store.try_get(prefix + "/rank/" + std::to_string(r));
      if (!v) {
        still.push_back(r);
      } else if (*v != std::to_string(job.world_size)) {
        throw StoreError("rendezvous at " + store.address() + ": rank " + std::to_string(r) + " has WORLD_SIZE=" + *v + ", rank " + me +
                         " has " + std::to_string(job.world_size));
      }
    }
    missing = std::move(still);
    if (missing.empty()) return;
    if (std::chrono::steady_clock::now() >= deadline) {
      std::string names;
      for (size_t i = 0; i < missing.size() && i < 16; ++i) names += (i ? ", " : "") + std::to_string(missing[i]);
      if (missing.size() > 16) names += ", ... (" + std::to_string(missing.size()) + " in all)";
      throw StoreError("rendezvous at " + store.address() + ": rank" + (missing.size() > 1 ? "s " : " ") + names + " of " +
                       std::to_string(job.world_size) + " never arrived within " + seconds(timeout) + " (rank " + me + " waited)");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, Millis{50});
  }
}

}  // namespace tracer::rt::dist
