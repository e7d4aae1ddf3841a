// checkpoint/header_json: a safetensors header's JSON, parsed by nlohmann-json with the checks a
// checkpoint reader adds (duplicate keys, integers only, int64 range, nesting depth).
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

#include "checkpoint/header_json.h"

using Catch::Matchers::Contains;
using nmt::checkpoint::HeaderJsonError;
using nmt::checkpoint::parse_header_json;

TEST_CASE("header json: a safetensors-shaped header parses, keys in document order",
          "[checkpoint][header_json]") {
  const auto v = parse_header_json(
      " {\"__metadata__\": {\"k\": \"v\"}, \"b\": {\"dtype\": \"F32\", \"shape\": [2, 3],"
      " \"data_offsets\": [0, 24]}, \"a\": {\"shape\": [], \"data_offsets\": [24, -7]}}   ");
  REQUIRE(v.is_object());
  REQUIRE(v.size() == 3);
  auto it = v.begin();
  CHECK(it.key() == "__metadata__");
  CHECK(it.value()["k"] == "v");
  CHECK((++it).key() == "b");
  CHECK(it.value()["shape"][1].get<int64_t>() == 3);
  CHECK((++it).key() == "a");
  CHECK(it.value()["shape"].empty());
  CHECK(it.value()["data_offsets"][1].get<int64_t>() == -7);
  CHECK(parse_header_json("{}").empty());
  CHECK(parse_header_json("9223372036854775807").get<int64_t>() == INT64_MAX);
  CHECK(parse_header_json("-9223372036854775808").get<int64_t>() == INT64_MIN);
  CHECK(parse_header_json(std::string(32, '[') + std::string(32, ']')).is_array());
}

TEST_CASE("header json: string escapes, u-escapes and surrogate pairs decode to UTF-8",
          "[checkpoint][header_json]") {
  CHECK(parse_header_json(R"("a\"b\\c\/d\b\f\n\r\t")") == "a\"b\\c/d\b\f\n\r\t");
  CHECK(parse_header_json(R"("\u00fc\u65E5")") == "\xC3\xBC\xE6\x97\xA5");  // ü 日
  CHECK(parse_header_json(R"("\ud83d\udc4b")") == "\xF0\x9F\x91\x8B");      // 👋
  CHECK(parse_header_json(R"("\u0000")") == std::string(1, '\0'));
}

TEST_CASE("header json: what a header never holds is refused, saying what",
          "[checkpoint][header_json]") {
  const auto fails = [](const std::string& text, const std::string& message) {
    INFO(text);
    CHECK_THROWS_AS(parse_header_json(text), HeaderJsonError);
    CHECK_THROWS_WITH(parse_header_json(text), Contains(message));
  };
  // Beyond JSON: what the checks on top refuse.
  fails("{\"a\": 1, \"a\": 2}", "duplicate key \"a\"");
  fails("{\"t\": {\"k\": 1}, \"u\": {\"k\": 1, \"x\": {\"k\": 2}, \"k\": 3}}",
        "duplicate key \"k\"");
  fails("1.5", "number 1.5: expected an integer in the 64-bit range");
  fails("[1e3]", "expected an integer");
  fails("9223372036854775808", "expected an integer in the 64-bit range");
  fails("-9223372036854775809", "expected an integer in the 64-bit range");
  fails("18446744073709551616", "expected an integer in the 64-bit range");
  fails("true", "true: expected an object, array, string or integer");
  fails("{\"a\": null}", "null: expected");
  fails(std::string(33, '[') + std::string(33, ']'), "more than 32 levels of nesting");
  // JSON itself, as nlohmann-json's parser reports it (without its exception tag).
  fails("", "parse error at line 1, column 1");
  fails("{\"a\": 1,}", "parse error at line 1, column 9");
  fails("{\"a\": 1} x", "expected end of input");
  fails("[1, 2", "parse error");
  fails("012", "parse error");
  fails("\"abc", "parse error");
  fails("\"a\nb\"", "control character");
  fails(R"("\x")", "parse error");
  fails(R"("\u12G4")", "parse error");
  fails(R"("\udc00")", "surrogate");
  fails(R"("\ud800\u0041")", "surrogate");
  fails("\"\xC3\x28\"", "ill-formed UTF-8");
  fails("\"\xED\xA0\x80\"", "ill-formed UTF-8");  // an encoded surrogate
  fails("\"\xC0\xAF\"", "ill-formed UTF-8");      // overlong
  CHECK_THROWS_WITH(parse_header_json("{"), !Contains("[json.exception"));
}
