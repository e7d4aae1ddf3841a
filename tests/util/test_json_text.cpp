// util/json_text: the project's JSON text from nlohmann::ordered_json, byte for byte what the
// run files have always held.
#include <catch2/catch.hpp>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "util/json_text.h"

using Json = nlohmann::ordered_json;

namespace {

/// An object with every kind of value: escapes, integers, reals, non-finite reals, booleans,
/// null, nested objects and arrays of numbers, strings and objects.
Json every_kind() {
  Json o;
  o["step"] = 12;
  o["loss"] = 2.5;
  o["whole"] = 2.0;
  o["nan"] = std::nan("");
  o["note"] = "a \"q\"";
  o["absent"] = nmt::json::or_null(std::optional<double>());
  o["present"] = nmt::json::or_null(std::optional<int64_t>(7));
  o["peaks"] = std::vector<double>{1.5, 2};
  o["hashes"] = std::vector<std::string>{"ab", "c\"d"};
  o["probes"] = {{{"n", 1}}, {{"n", 2}, {"oom", nullptr}}};
  o["fit"] = {{"sentences", 31}, {"oom", true}, {"inner", {{"x", -0.5}}}};
  o["empty"] = Json::object();
  return o;
}

}  // namespace

TEST_CASE("json: line writes members in order, shortest numbers, nulls for non-finite ones",
          "[json]") {
  CHECK(nmt::json::line(every_kind()) ==
        "{\"step\": 12, \"loss\": 2.5, \"whole\": 2, \"nan\": null, \"note\": \"a \\\"q\\\"\", "
        "\"absent\": null, \"present\": 7, \"peaks\": [1.5, 2], \"hashes\": [\"ab\", \"c\\\"d\"], "
        "\"probes\": [{\"n\": 1}, {\"n\": 2, \"oom\": null}], "
        "\"fit\": {\"sentences\": 31, \"oom\": true, \"inner\": {\"x\": -0.5}}, \"empty\": {}}");
  CHECK(nmt::json::line(Json(0.1 + 0.2)) == "0.30000000000000004");
  CHECK(nmt::json::line(Json(1e21)) == "1e+21");
  CHECK(nmt::json::line(Json(1e-5)) == "1e-05");
  CHECK(nmt::json::line(Json(-HUGE_VAL)) == "null");
  CHECK(nmt::json::line(Json(int64_t{-9223372036854775807 - 1})) == "-9223372036854775808");
  CHECK(nmt::json::line(Json(uint64_t{18446744073709551615u})) == "18446744073709551615");
}

TEST_CASE("json: pretty indents objects in objects, down to a depth, and keeps arrays on a line",
          "[json]") {
  CHECK(nmt::json::pretty(every_kind()) ==
        "{\n  \"step\": 12,\n  \"loss\": 2.5,\n  \"whole\": 2,\n  \"nan\": null,\n"
        "  \"note\": \"a \\\"q\\\"\",\n  \"absent\": null,\n  \"present\": 7,\n"
        "  \"peaks\": [1.5, 2],\n  \"hashes\": [\"ab\", \"c\\\"d\"],\n"
        "  \"probes\": [{\"n\": 1}, {\"n\": 2, \"oom\": null}],\n"
        "  \"fit\": {\n    \"sentences\": 31,\n    \"oom\": true,\n    \"inner\": {\n"
        "      \"x\": -0.5\n    }\n  },\n  \"empty\": {}\n}\n");
  CHECK(nmt::json::pretty(every_kind(), 1)
            .find("  \"fit\": {\"sentences\": 31, \"oom\": true, \"inner\": {\"x\": -0.5}},\n") !=
        std::string::npos);
  CHECK(nmt::json::pretty(every_kind(), 2).find("    \"inner\": {\"x\": -0.5}\n  },\n") !=
        std::string::npos);
  CHECK(nmt::json::pretty(Json::object()) == "{}\n");
}

TEST_CASE("json: strings are escaped as before, UTF-8 as is, invalid UTF-8 replaced", "[json]") {
  std::string controls;
  for (int c = 1; c < 0x20; ++c) controls += static_cast<char>(c);
  CHECK(nmt::json::quote(controls) ==
        "\"\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007\\b\\t\\n\\u000b\\f\\r\\u000e\\u000f"
        "\\u0010\\u0011\\u0012\\u0013\\u0014\\u0015\\u0016\\u0017\\u0018\\u0019\\u001a\\u001b"
        "\\u001c\\u001d\\u001e\\u001f\"");
  CHECK(nmt::json::quote("a\"b\\/\x7f") == "\"a\\\"b\\\\/\x7f\"");
  CHECK(nmt::json::quote(std::string(1, '\0')) == "\"\\u0000\"");
  CHECK(nmt::json::quote("Gr\xC3\xBC\xC3\x9F"
                         "e \xF0\x9F\x91\x8B") ==
        "\"Gr\xC3\xBC\xC3\x9F"
        "e \xF0\x9F\x91\x8B\"");
  CHECK(nmt::json::quote("a\xC3\x28") == "\"a\xEF\xBF\xBD(\"");  // U+FFFD, and the JSON stays valid
  // What is written reads back.
  const Json back = Json::parse(nmt::json::line(every_kind()));
  CHECK(back["note"] == "a \"q\"");
  CHECK(back["fit"]["inner"]["x"] == -0.5);
  CHECK(back["nan"].is_null());
}
