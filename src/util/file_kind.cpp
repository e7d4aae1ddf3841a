#include "util/file_kind.h"

#include <system_error>

namespace nmt {

std::string not_regular_file(const std::filesystem::path& file) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(file, ec);  // follows links
  switch (status.type()) {
    case fs::file_type::regular:
      return {};
    case fs::file_type::not_found: {
      std::error_code link_ec;
      return fs::is_symlink(fs::symlink_status(file, link_ec)) ? "a broken link" : std::string();
    }
    case fs::file_type::fifo:
      return "a FIFO";
    case fs::file_type::directory:
      return "a directory";
    case fs::file_type::socket:
      return "a socket";
    case fs::file_type::block:
    case fs::file_type::character:
      return "a device";
    default:
      return ec ? std::string() : "another kind of file";
  }
}

}  // namespace nmt
