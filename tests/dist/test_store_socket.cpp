// dist/store_socket and the store's bounds: the rendezvous store listens only where
// MASTER_ADDR points or not at all, and what ranks read from it is bounded and parsed. Every
// socket here is on the loopback; the documentation addresses (TEST-NET-1, -2 and -3, those
// that are not this machine's: a sandbox may give its interface one) are only ever bound,
// which fails at once with EADDRNOTAVAIL and sends nothing.
#include "catch_torch.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "dist/key_value_store.h"
#include "dist/launcher.h"
#include "dist/process_group.h"
#include "dist/store_socket.h"
#include "dist/store_values.h"
#include "rank_threads.h"
#include "test_support.h"
#include "util/error.h"

using namespace std::chrono_literals;
using Catch::Matchers::Contains;
using nmt::dist::Communicator;
using nmt::dist::CommunicatorOptions;

namespace {

CommunicatorOptions options(const std::string& addr, int port, int rank, int world) {
  CommunicatorOptions o;
  o.master_addr = addr;
  o.master_port = port;
  o.rank = rank;
  o.world_size = world;
  o.timeout = 10s;
  return o;
}

/// VmRSS of this process (bytes).
int64_t resident_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  return 0;
}

/// The numeric IPv4 addresses of this machine's interfaces.
std::vector<std::string> own_addresses() {
  std::vector<std::string> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (const ifaddrs* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr, text,
                sizeof text);
    out.push_back(text);
  }
  ::freeifaddrs(list);
  return out;
}

/// Documentation addresses (RFC 5737) that are not this machine's, 192.0.2.1 first.
std::vector<std::string> foreign_addresses() {
  const std::vector<std::string> own = own_addresses();
  std::vector<std::string> out;
  for (const char* a : {"192.0.2.1", "198.51.100.1", "203.0.113.1", "192.0.2.77"})
    if (std::find(own.begin(), own.end(), a) == own.end()) out.push_back(a);
  return out;
}

template <class T>
void append(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

}  // namespace

TEST_CASE("MASTER_ADDR not of this machine is refused, naming it, not served on every interface",
          "[dist]") {
  const std::vector<std::string> foreign = foreign_addresses();
  REQUIRE(foreign.size() >= 2);
  const std::string addr = foreign[0];
  try {
    const nmt::dist::StoreSocket bound = nmt::dist::listen_for_store(addr, 0);
    ::close(bound.fd);
    FAIL("listened for " << addr << " on " << bound.address << ":" << bound.port);
  } catch (const nmt::DistError& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK_THAT(what, Contains(addr + " (not an address of this machine)"));
    CHECK_THAT(what, Contains("MASTER_ADDR"));
    CHECK_THAT(what, Contains("127.0.0.1 when all ranks run on one machine"));
  }
  // Rank 0 of a job with that MASTER_ADDR stops before anyone connects.
  CHECK_THROWS_MATCHES(Communicator(options(addr, nmt::dist::find_free_port(), 0, 2)),
                       nmt::DistError,
                       Catch::Matchers::Predicate<nmt::DistError>(
                           [](const nmt::DistError& e) {
                             const std::string what = e.what();
                             return what.find("rank 0: cannot host the rendezvous store") !=
                                        std::string::npos &&
                                    what.find("MASTER_ADDR") != std::string::npos;
                           },
                           "rank 0 names MASTER_ADDR"));
}

TEST_CASE("a name of several addresses is served on the first that is this machine's", "[dist]") {
  const std::vector<std::string> foreign = foreign_addresses();
  REQUIRE(foreign.size() >= 2);
  // As a name resolving to a foreign address first (a stale DNS or /etc/hosts entry) would.
  const nmt::dist::StoreSocket bound =
      nmt::dist::listen_for_store_on("node0", {foreign[0], "127.0.0.1"}, 0);
  CHECK(bound.address == "127.0.0.1");
  CHECK(nmt::test::listening_addresses(bound.port) == std::vector<std::string>{"0100007F"});
  ::close(bound.fd);
  CHECK_THROWS_WITH(nmt::dist::listen_for_store_on("node0", {foreign[0], foreign[1]}, 0),
                    Contains("cannot listen on node0:0: " + foreign[0] +
                             " (not an address of this machine); " + foreign[1] +
                             " (not an address of this machine)") &&
                        Contains("MASTER_ADDR"));
}

TEST_CASE("ranks meet at a store host given by name: localhost", "[dist][gloo]") {
  // "localhost" may resolve to ::1 and 127.0.0.1: rank 0 serves one, clients try each.
  const int port = nmt::dist::find_free_port();
  const auto errors = nmt::test::run_ranks(2, [&](int rank) {
    Communicator comm(options("localhost", port, rank, 2));
    NMT_RANK_CHECK(comm.all_gather_strings(std::to_string(rank)) ==
                   std::vector<std::string>{"0", "1"});
    comm.barrier();
  });
  nmt::test::require_no_errors(errors);
}

TEST_CASE("a client claiming a 10 GB value is refused by the store, which allocates nothing",
          "[dist][gloo]") {
  Communicator comm(options("127.0.0.1", 0, 0, 1));  // hosts the store on a free port
  const int port = comm.options().master_port;
  const int64_t before = resident_bytes();
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  timeval wait{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
  // LibTorch's TCPStore protocol: VALIDATE with its magic number, then SET of one key whose
  // value claims 10 GB (none of it follows).
  std::string request;
  append<uint8_t>(request, 0);  // VALIDATE
  append<uint32_t>(request, 0x3C85F7CE);
  append<uint8_t>(request, 1);  // SET
  const std::string key = "/nmt/huge";
  append<uint64_t>(request, key.size());
  request += key;
  append<uint64_t>(request, uint64_t{10} << 30);
  REQUIRE(::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size()));
  char byte = 0;
  const ssize_t got = ::recv(fd, &byte, 1, 0);
  ::close(fd);
  CHECK(got == 0);  // the server closed the connection instead of waiting for 10 GB
  CHECK(resident_bytes() - before < (int64_t{256} << 20));
  // The store still serves the job, and holds no such key.
  comm.store()->set("nmt/after", "fine");
  CHECK(comm.store()->get_if_set("nmt/after") == "fine");
  CHECK_FALSE(comm.store()->get_if_set("nmt/huge").has_value());
}

TEST_CASE("a string over the bound of all_gather_strings is refused, naming its size",
          "[dist][gloo]") {
  Communicator comm(options("127.0.0.1", 0, 0, 1));
  const std::string big(nmt::dist::kMaxGatherBytes + 1, 'x');
  CHECK_THROWS_WITH(comm.all_gather_strings(big),
                    Contains("'nmt/gather/0/0' in the rendezvous store holds 1048577 bytes, "
                             "more than the 1048576"));
  // A value that another client put under a key is bounded when read, too.
  comm.store()->set("nmt/progress/0", big);
  CHECK_THROWS_WITH(comm.store()->get_if_set("nmt/progress/0"), Contains("holds 1048577 bytes"));
}

TEST_CASE("store integers parse strictly, and a malformed one is named malformed", "[dist]") {
  using nmt::dist::parse_store_integer;
  CHECK(parse_store_integer(0, "k", "42", "a count") == 42);
  CHECK(parse_store_integer(0, "k", "-1", "a count") == -1);
  for (const std::string bad : {"", "-", "4x", " 4", "x", "99999999999999999999", "1|2"}) {
    INFO("'" << bad << "'");
    CHECK_THROWS_WITH(parse_store_integer(3, "nmt/key", bad, "a count"),
                      Contains("rank 3: malformed value of 'nmt/key' in the rendezvous store") &&
                          Contains("expected a count"));
  }
  CHECK_THROWS_WITH(parse_store_integer(-1, "k", std::string("1\0", 2), "n"),
                    Contains("malformed value of 'k' in the rendezvous store: '1?'"));
}
