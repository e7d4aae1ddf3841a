// checkpoint/safetensors_io: the dtype names, the header checksum and the positioned reads that
// reading and writing checkpoints share.
#include "catch_torch.h"  // first: see the header

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "checkpoint/safetensors_io.h"
#include "test_support.h"
#include "util/error.h"

using Catch::Matchers::Contains;
using nmt::checkpoint::TensorEntry;

TEST_CASE("every safetensors dtype name maps to its dtype and back", "[checkpoint]") {
  for (const char* name : {"F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL"}) {
    const auto type = nmt::checkpoint::dtype_from_name(name);
    REQUIRE(type.has_value());
    CHECK(nmt::checkpoint::dtype_name(*type) == name);
    CHECK_THAT(nmt::checkpoint::kSupportedDtypes, Contains(name));
  }
  CHECK_FALSE(nmt::checkpoint::dtype_from_name("F8_E4M3").has_value());
  CHECK_FALSE(nmt::checkpoint::dtype_from_name("f32").has_value());
  // An unsupported dtype is named the way torch names it.
  CHECK(nmt::checkpoint::dtype_name(c10::ScalarType::ComplexFloat) == "ComplexFloat");
}

TEST_CASE("the header checksum covers format, metadata and every entry field", "[checkpoint]") {
  const auto digest = [](std::string_view format, const std::map<std::string, std::string>& meta,
                         const std::vector<TensorEntry>& tensors) {
    nmt::checkpoint::XxHash64 hash;
    nmt::checkpoint::hash_header(hash, format, meta, tensors);
    return hash.digest();
  };
  const std::vector<TensorEntry> one{{"w", c10::ScalarType::Float, {2, 3}, 0, 24}};
  const uint64_t base = digest("nmt-checkpoint-2", {{"step", "4"}}, one);
  CHECK(digest("nmt-checkpoint-2", {{"step", "4"}}, one) == base);
  CHECK(digest("nmt-checkpoint-1", {{"step", "4"}}, one) != base);
  CHECK(digest("nmt-checkpoint-2", {{"step", "5"}}, one) != base);
  CHECK(digest("nmt-checkpoint-2", {{"ste", "p4"}}, one) != base);  // strings end with a 0
  for (int field = 0; field < 5; ++field) {
    std::vector<TensorEntry> changed = one;
    TensorEntry& t = changed[0];
    if (field == 0) t.name = "v";
    if (field == 1) t.type = c10::ScalarType::Int;
    if (field == 2) t.shape = {3, 2};
    if (field == 3) t.begin = 8;
    if (field == 4) t.end = 32;
    INFO("field " << field);
    CHECK(digest("nmt-checkpoint-2", {{"step", "4"}}, changed) != base);
  }
}

TEST_CASE("read_at reads exactly, and a short file is reported truncated", "[checkpoint]") {
  nmt::test::TempDir dir;
  const auto file = dir.write("data.bin", "0123456789");
  const int fd = nmt::checkpoint::open_for_reading(file);
  nmt::checkpoint::FdCloser closer(fd);
  char out[4] = {};
  nmt::checkpoint::read_at(fd, file, out, sizeof out, 3);
  CHECK(std::string(out, sizeof out) == "3456");
  CHECK_THROWS_WITH(nmt::checkpoint::read_at(fd, file, out, sizeof out, 8),
                    Contains(file.string() + ": truncated: the file ended at byte 10"));
  CHECK_THROWS_WITH(nmt::checkpoint::open_for_reading(dir.path() / "none"),
                    Contains("none: cannot open: No such file or directory"));
}
