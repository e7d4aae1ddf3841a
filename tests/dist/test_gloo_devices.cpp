// Which network devices Gloo connects through (dist/gloo_devices.h).
#include "catch_torch.h"
#include "skip.h"

#include <net/if.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "dist/gloo_devices.h"

namespace {

/// Sets an environment variable for one scope and restores what it was.
class ScopedGlooEnv {
 public:
  ScopedGlooEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedGlooEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedGlooEnv(const ScopedGlooEnv&) = delete;
  ScopedGlooEnv& operator=(const ScopedGlooEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace

TEST_CASE("gloo devices: the address towards a local master is the loopback", "[dist][gloo]") {
  CHECK(nmt::dist::local_address_towards("127.0.0.1", 29500) == "127.0.0.1");
  ScopedGlooEnv unset("GLOO_SOCKET_IFNAME", "");
  const auto devices = nmt::dist::gloo_devices("127.0.0.1", 29500);
  REQUIRE(devices.size() == 1);
  CHECK(devices[0] != nullptr);
}

TEST_CASE("gloo devices: GLOO_SOCKET_IFNAME names the interfaces, one device each",
          "[dist][gloo]") {
  if (::if_nametoindex("lo") == 0) NMT_SKIP("this machine has no interface named lo");
  ScopedGlooEnv names("GLOO_SOCKET_IFNAME", "lo,,lo");
  const auto devices = nmt::dist::gloo_devices("127.0.0.1", 29500);
  CHECK(devices.size() == 2);  // the empty name between the commas is left out
}
