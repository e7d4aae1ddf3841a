// dist/rendezvous: which ranks share a host (the pure grouping of the ranks' announcements),
// and what this process announces.
#include "catch_torch.h"

#include <string>
#include <vector>

#include "dist/rendezvous.h"
#include "dist/store_values.h"
#include "util/error.h"

using nmt::dist::HostIdentity;
using nmt::dist::host_ranks_of;

namespace {

HostIdentity host(std::string name, std::string boot = "b0", std::string netns = "4026531833") {
  return {std::move(name), std::move(boot), std::move(netns)};
}

}  // namespace

TEST_CASE("the rendezvous counts the ranks of each host", "[dist]") {
  const std::vector<HostIdentity> hosts{host("a"), host("b"), host("a"), host("a"), host("b")};
  CHECK(host_ranks_of(hosts, 0).local_rank == 0);
  CHECK(host_ranks_of(hosts, 0).local_world_size == 3);
  CHECK(host_ranks_of(hosts, 2).local_rank == 1);
  CHECK(host_ranks_of(hosts, 3).local_rank == 2);
  CHECK(host_ranks_of(hosts, 1).local_rank == 0);
  CHECK(host_ranks_of(hosts, 4).local_rank == 1);
  CHECK(host_ranks_of(hosts, 4).local_world_size == 2);
  CHECK(host_ranks_of({host("only")}, 0).local_world_size == 1);
  CHECK_THROWS_AS(host_ranks_of(hosts, 5), nmt::DistError);
}

TEST_CASE("ranks with one hostname on machines of another boot id are separate hosts", "[dist]") {
  // Cloned machine images: one hostname, two machines (boot ids), 2 ranks each.
  const std::vector<HostIdentity> hosts{host("node", "boot-a"), host("node", "boot-a"),
                                        host("node", "boot-b"), host("node", "boot-b")};
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r);
    CHECK(host_ranks_of(hosts, r).local_world_size == 2);
    CHECK(host_ranks_of(hosts, r).local_rank == r % 2);
  }
  // The fallback name of hosts without one is no reason to merge them either.
  const std::vector<HostIdentity> unnamed{host("(unnamed host)", "boot-a"),
                                          host("(unnamed host)", "boot-b")};
  CHECK(host_ranks_of(unnamed, 0).local_world_size == 1);
  CHECK(host_ranks_of(unnamed, 1).local_rank == 0);
}

TEST_CASE("ranks with one hostname and boot id in two network namespaces are two hosts",
          "[dist]") {
  // scripts/fault/two-hosts.sh: two namespaces of one machine (same kernel, same hostname).
  const std::vector<HostIdentity> hosts{host("box", "boot", "4026532100"),
                                        host("box", "boot", "4026532200")};
  CHECK(host_ranks_of(hosts, 0).local_world_size == 1);
  CHECK(host_ranks_of(hosts, 1).local_world_size == 1);
  CHECK(host_ranks_of(hosts, 1).local_rank == 0);
}

TEST_CASE("ranks that agree on hostname, boot id and network namespace are one host", "[dist]") {
  const std::vector<HostIdentity> hosts{host("box", "boot", "4026532100"),
                                        host("box", "boot", "4026532100"),
                                        host("box", "boot", "4026532100")};
  for (int r = 0; r < 3; ++r) {
    CHECK(host_ranks_of(hosts, r).local_world_size == 3);
    CHECK(host_ranks_of(hosts, r).local_rank == r);
  }
  // Containers of one machine (one boot id) with hostnames of their own stay apart.
  CHECK(host_ranks_of({host("pod-a", "boot"), host("pod-b", "boot")}, 1).local_world_size == 1);
}

TEST_CASE("this process announces its hostname, boot id and network namespace", "[dist]") {
  const HostIdentity here = nmt::dist::this_host();
  CHECK_FALSE(here.hostname.empty());
  CHECK(here.boot_id.size() == 36);  // a UUID, as /proc/sys/kernel/random/boot_id holds
  CHECK_FALSE(here.netns.empty());
  CHECK(here.netns.find_first_not_of("0123456789") == std::string::npos);
  const std::string text = nmt::dist::announcement(1234, here);
  CHECK(nmt::dist::parse_announcement(text, 0, "nmt/rdzv/0") == here);
  // The log line shows the hostname first, for people.
  CHECK(here.describe().rfind(here.hostname + " (boot ", 0) == 0);
  // Unknown parts and a hostname with a space survive the round trip.
  const HostIdentity bare{"(unnamed host)", "", ""};
  CHECK(nmt::dist::parse_announcement(nmt::dist::announcement(7, bare), 1, "k") == bare);
}

TEST_CASE("a malformed or oversized announcement is a DistError that says so", "[dist]") {
  using Catch::Matchers::Contains;
  CHECK_THROWS_WITH(nmt::dist::parse_announcement("1234 node", 1, "nmt/rdzv/0"),
                    Contains("rank 1: malformed value of 'nmt/rdzv/0'") && Contains("'1234 node'"));
  CHECK_THROWS_WITH(nmt::dist::parse_announcement("x b n host", 1, "nmt/rdzv/0"),
                    Contains("malformed"));
  const std::string huge(nmt::dist::kMaxAnnouncementBytes + 1, '7');
  CHECK_THROWS_WITH(nmt::dist::parse_announcement(huge, 0, "nmt/rdzv/1"),
                    Contains("'nmt/rdzv/1' in the rendezvous store holds 1025 bytes, more than "
                             "the 1024"));
}
