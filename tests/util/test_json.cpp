// util/json: the header parser (the subset safetensors headers use, strictly) and the writer.
#include <catch2/catch.hpp>

#include <cmath>
#include <optional>
#include <vector>

#include "util/json.h"

using Catch::Matchers::Contains;
using nmt::json::parse;
using nmt::json::ParseError;
using nmt::json::quote;
using Kind = nmt::json::Value::Kind;

TEST_CASE("json: a safetensors-shaped header parses, keys in document order", "[json]") {
  const auto v = parse(
      " {\"__metadata__\": {\"k\": \"v\"}, \"b\": {\"dtype\": \"F32\", \"shape\": [2, 3],"
      " \"data_offsets\": [0, 24]}, \"a\": {\"shape\": [], \"data_offsets\": [24, -7]}}   ");
  REQUIRE(v.kind == Kind::kObject);
  REQUIRE(v.object.size() == 3);
  CHECK(v.object[0].first == "__metadata__");
  CHECK(v.object[0].second.object.at(0).second.string == "v");
  CHECK(v.object[1].first == "b");
  const auto& shape = v.object[1].second.object[1].second;
  REQUIRE(shape.kind == Kind::kArray);
  CHECK(shape.array.size() == 2);
  CHECK(shape.array[1].integer == 3);
  CHECK(v.object[2].first == "a");
  CHECK(v.object[2].second.object[0].second.array.empty());
  CHECK(v.object[2].second.object[1].second.array[1].integer == -7);
  CHECK(parse("{}").object.empty());
  CHECK(parse("9223372036854775807").integer == INT64_MAX);
  CHECK(parse("-9223372036854775808").integer == INT64_MIN);
}

TEST_CASE("json: string escapes, u-escapes and surrogate pairs decode to UTF-8", "[json]") {
  CHECK(parse(R"("a\"b\\c\/d\b\f\n\r\t")").string == "a\"b\\c/d\b\f\n\r\t");
  CHECK(parse(R"("\u00fc\u65E5")").string == "\xC3\xBC\xE6\x97\xA5");  // ü 日
  CHECK(parse(R"("\ud83d\udc4b")").string == "\xF0\x9F\x91\x8B");      // 👋
  CHECK(parse("\"Gr\xC3\xBC\xC3\x9F"
              "e \xF0\x9F\x91\x8B\"")
            .string ==
        "Gr\xC3\xBC\xC3\x9F"
        "e \xF0\x9F\x91\x8B");
  CHECK(parse(R"("\u0000")").string == std::string(1, '\0'));
}

TEST_CASE("json: writing then parsing gives the text back", "[json]") {
  std::string all_bytes;
  for (int c = 1; c < 0x80; ++c) all_bytes += static_cast<char>(c);
  all_bytes += "\xE6\x97\xA5\xF0\x9F\x91\x8B";
  all_bytes += std::string(1, '\0');
  CHECK(parse(quote(all_bytes)).string == all_bytes);
  CHECK(quote("a\"b\\\n\x01") == R"("a\"b\\\n\u0001")");
}

TEST_CASE("json: malformed input is rejected with what was expected and where", "[json]") {
  const auto fails = [](const std::string& text, const std::string& message) {
    INFO(text);
    CHECK_THROWS_WITH(parse(text), Contains(message));
  };
  fails("", "expected an object, array, string or integer at byte 0, found the end");
  fails("{\"a\": 1,}", "expected a string key at byte 8, found '}'");
  fails("{\"a\": 1} x", "expected end of input at byte 9");
  fails("{\"a\": 1, \"a\": 2}", "duplicate key \"a\"");
  fails("[1, 2", "expected ',' or ']' at byte 5, found the end");
  fails("1.5", "no fraction or exponent");
  fails("1e3", "no fraction or exponent");
  fails("012", "no leading zeros");
  fails("9223372036854775808", "within the 64-bit range");
  fails("-9223372036854775809", "within the 64-bit range");
  fails("true", "expected an object, array, string or integer");
  fails("null", "expected an object, array, string or integer");
  fails("\"abc", "closing the string");
  fails("\"a\nb\"", "an escaped control character at byte 2");
  fails(R"("\x")", "one of");
  fails(R"("\u12G4")", "4 hex digits");
  fails(R"("\udc00")", "a high surrogate before a low surrogate");
  fails(R"("\ud800x")", "a \\u low surrogate after a high surrogate");
  fails(R"("\ud800\u0041")", "a low surrogate");
  fails("\"\xC3\x28\"", "expected valid UTF-8 at byte 1");
  fails("\"\xED\xA0\x80\"", "valid UTF-8");  // an encoded surrogate
  fails("\"\xC0\xAF\"", "valid UTF-8");      // overlong
  fails(std::string(40, '[') + std::string(40, ']'), "at most 32 levels of nesting");
  CHECK_THROWS_AS(parse("{"), ParseError);
}

TEST_CASE("json: Object writes members in order, nulls for absent and non-finite values", "[json]") {
  nmt::json::Object inner;
  inner.add("sentences", int64_t{31}).add("oom", true);
  nmt::json::Object o;
  o.add("step", 12)
      .add("loss", 2.5)
      .add("nan", std::nan(""))
      .add("note", "a \"q\"")
      .add("absent", std::optional<double>())
      .add("present", std::optional<int64_t>(7))
      .add("peaks", std::vector<double>{1.5, 2})
      .add("hashes", std::vector<std::string>{"ab", "c\"d"})
      .add("fit", inner);
  CHECK(o.str() ==
        "{\"step\": 12, \"loss\": 2.5, \"nan\": null, \"note\": \"a \\\"q\\\"\", "
        "\"absent\": null, \"present\": 7, \"peaks\": [1.5, 2], \"hashes\": [\"ab\", \"c\\\"d\"], "
        "\"fit\": {\"sentences\": 31, \"oom\": true}}");
  CHECK(o.pretty() ==
        "{\n  \"step\": 12,\n  \"loss\": 2.5,\n  \"nan\": null,\n  \"note\": \"a \\\"q\\\"\",\n"
        "  \"absent\": null,\n  \"present\": 7,\n  \"peaks\": [1.5, 2],\n"
        "  \"hashes\": [\"ab\", \"c\\\"d\"],\n"
        "  \"fit\": {\n    \"sentences\": 31,\n    \"oom\": true\n  }\n}\n");
  CHECK(nmt::json::Object().pretty() == "{}\n");
}

TEST_CASE("json: Object lists its numbers by path and gives a member's text", "[json]") {
  nmt::json::Object inner;
  inner.add("x", 1.5).add("s", "a \"quoted\" [text]").add("b", false);
  std::vector<nmt::json::Object> list(1);
  list[0].add("k\"ey", int64_t{-3});
  nmt::json::Object o;
  o.add("step", int64_t{12}).add("loss", 2.5e-3).add("nan", std::nan("")).add("inner", inner)
      .add("v", std::vector<double>{4, 5}).add("objs", list).add("flag", true)
      .add_raw("empty", "[]").add_raw("none", "{}");
  const std::vector<std::pair<std::string, double>> expected = {
      {"step", 12}, {"loss", 2.5e-3}, {"inner/x", 1.5}, {"v/0", 4}, {"v/1", 5}, {"objs/0/k\"ey", -3}};
  CHECK(o.numbers() == expected);
  CHECK(o.member("inner") == std::optional<std::string_view>(inner.str()));
  CHECK(o.member("step") == std::optional<std::string_view>("12"));
  CHECK_FALSE(o.member("absent"));
}

TEST_CASE("json: number_texts gives each number of a text by path as it is written", "[json]") {
  using Texts = std::vector<std::pair<std::string, std::string_view>>;
  CHECK(nmt::json::number_texts(R"({"step": 12, "s": "\"step\": 9", "a": {"step": [1, 2.5e3]}})") ==
        Texts{{"/step", "12"}, {"/a/step/0", "1"}, {"/a/step/1", "2.5e3"}});
  CHECK(nmt::json::number_texts("-0.5") == Texts{{"", "-0.5"}});
  CHECK(nmt::json::number_texts(R"({"t": true, "n": null, "e": []})").empty());
  CHECK_THROWS_AS(nmt::json::number_texts(R"({"a" 1})"), nmt::json::ParseError);
  CHECK_THROWS_AS(nmt::json::number_texts(R"({"a": "unterminated})"), nmt::json::ParseError);
}
