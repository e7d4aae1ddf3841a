#include "dist/store_values.h"

#include <cerrno>
#include <cstdlib>

#include <fmt/format.h>

#include "util/error.h"

namespace nmt::dist {

namespace {

std::string rank_prefix(int rank) {
  return rank < 0 ? std::string() : fmt::format("rank {}: ", rank);
}

}  // namespace

void check_value_size(int rank, const std::string& key, const std::string& value, size_t limit,
                      const char* what) {
  NMT_CHECK(value.size() <= limit, DistError,
            "{}'{}' in the rendezvous store holds {} bytes, more than the {} of {}",
            rank_prefix(rank), key, value.size(), limit, what);
}

std::string printable_prefix(const std::string& value, size_t n) {
  std::string out;
  for (size_t i = 0; i < value.size() && i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(value[i]);
    out += c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '?';
  }
  if (value.size() > n) out += "...";
  return out;
}

int64_t parse_store_integer(int rank, const std::string& key, const std::string& value,
                            const char* what) {
  const auto malformed = [&] {
    NMT_THROW(DistError,
              "{}malformed value of '{}' in the rendezvous store: '{}' "
              "(expected {}, a decimal integer)",
              rank_prefix(rank), key, printable_prefix(value), what);
  };
  if (value.empty() || value.size() > kMaxIntegerBytes) malformed();
  const size_t digits = value[0] == '-' ? 1 : 0;
  if (digits == value.size()) malformed();
  for (size_t i = digits; i < value.size(); ++i)
    if (value[i] < '0' || value[i] > '9') malformed();
  errno = 0;
  char* end = nullptr;
  const long long parsed = std::strtoll(value.c_str(), &end, 10);
  if (errno == ERANGE || end != value.c_str() + value.size()) malformed();
  return static_cast<int64_t>(parsed);
}

}  // namespace nmt::dist
