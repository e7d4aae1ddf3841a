#include "util/host_name.h"

#include <unistd.h>

namespace nmt {

std::optional<std::string> host_name() {
  // Linux names are at most 64 bytes (HOST_NAME_MAX); the buffer leaves room for other systems
  // and for the terminating zero that gethostname may omit when it truncates.
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return std::nullopt;
  return std::string(name);
}

}  // namespace nmt
