// Regression: the torch wheel's libtorch.so exports std::filesystem::remove_all (and more),
// and binaries that list libtorch before libstdc++ called that copy and crashed.

#include "catch_torch.h"  // first: see the header

#include <filesystem>
#include <fstream>

#include "dist/device.h"

TEST_CASE("std::filesystem works in binaries that link LibTorch", "[dist]") {
  // Use LibTorch so the library is really loaded.
  CHECK_FALSE(nmt::dist::probe_devices().torch_version.empty());
  const auto root = std::filesystem::temp_directory_path() / "nmt-libstdcxx-symbols";
  std::filesystem::create_directories(root / "a" / "b");
  std::ofstream(root / "a" / "b" / "file") << "x";
  std::error_code ec;
  CHECK(std::filesystem::remove_all(root, ec) == 4);
  CHECK_FALSE(ec);
  CHECK_FALSE(std::filesystem::exists(root));
}
