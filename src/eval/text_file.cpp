#include "eval/text_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "eval/unicode.h"
#include "util/error.h"
#include "util/utf8.h"

namespace nmt::eval {

std::vector<std::string> read_text_lines(std::istream& in, const std::string& name) {
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    const size_t bad = find_invalid_utf8(line);
    NMT_CHECK(bad == std::string::npos, DataError,
              "{}:{}: invalid UTF-8 at byte {} (expected UTF-8 text)", name, lines.size() + 1,
              bad + 1);
    lines.emplace_back(rstrip(line));
  }
  NMT_CHECK(!in.bad(), DataError, "{}: read failed after line {}", name, lines.size());
  return lines;
}

std::vector<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  NMT_CHECK(in.is_open(), DataError, "{}: cannot open ({})", path, std::strerror(errno));
  return read_text_lines(in, path);
}

}  // namespace nmt::eval
