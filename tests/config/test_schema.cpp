#include <catch2/catch.hpp>

#include "config/schema.h"
#include "test_support.h"
#include "util/error.h"

using Catch::Matchers::Contains;
using nmt::ConfigError;
using nmt::config::Schema;

namespace {

enum class Mode { kOff, kFp16, kBf16 };

/// A small config with one field of each kind, to exercise the schema without RunConfig.
struct Sample {
  std::string name = "x";
  int64_t tokens = 10;
  double rate = 0.5;
  bool flag = false;
  Mode mode = Mode::kOff;
  std::string input;
};

Schema bind(Sample& s) {
  Schema schema;
  schema.text("name", &s.name, "a name");
  schema.integer("sec.tokens", &s.tokens, 1, 1000, "tokens");
  schema.real("sec.rate", &s.rate, 0, 1, "a rate");
  schema.boolean("sec.flag", &s.flag, "a flag");
  schema.choice("sec.mode", &s.mode,
                {{"off", Mode::kOff}, {"fp16", Mode::kFp16}, {"bf16", Mode::kBf16}}, "a mode");
  schema.input_path("other.input", &s.input, "an input file");
  return schema;
}

/// Applies `yaml` (as file "cfg.yaml") to a fresh Sample and returns the error message, or ""
std::string apply_error(const std::string& yaml) {
  Sample s;
  Schema schema = bind(s);
  try {
    schema.apply_document(YAML::Load(yaml), "cfg.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("schema applies a document and records where each value came from", "[config]") {
  Sample s;
  Schema schema = bind(s);
  schema.apply_document(YAML::Load("name: run1\nsec:\n  tokens: 42\n  rate: 0.25\n"
                                   "  flag: yes\n  mode: bf16\n"),
                        "cfg.yaml");
  CHECK(s.name == "run1");
  CHECK(s.tokens == 42);
  CHECK(s.rate == 0.25);
  CHECK(s.flag);
  CHECK(s.mode == Mode::kBf16);
  CHECK(schema.origin("sec.tokens").describe() == "cfg.yaml:3:11");
  CHECK(schema.origin("other.input").describe() == "default");
}

TEST_CASE("schema names file, line, key and the closest valid key for an unknown key",
          "[config]") {
  CHECK(apply_error("sec:\n  tokens: 1\n  tokenz: 2\n") ==
        "cfg.yaml:3:3: unknown key 'sec.tokenz'; did you mean 'sec.tokens'?");
  // A key at the wrong level still finds its home.
  CHECK(apply_error("tokens: 5\n") ==
        "cfg.yaml:1:1: unknown key 'tokens'; did you mean 'sec.tokens'?");
  // Nothing close: no suggestion.
  CHECK(apply_error("completely_unrelated: 5\n") ==
        "cfg.yaml:1:1: unknown key 'completely_unrelated'");
}

TEST_CASE("schema reports wrong types and ranges as expected versus found", "[config]") {
  CHECK(apply_error("sec:\n  tokens: many\n") ==
        "cfg.yaml:2:11: sec.tokens: expected an integer in [1, 1000], found 'many'");
  CHECK(apply_error("sec:\n  tokens: 2.5\n") ==
        "cfg.yaml:2:11: sec.tokens: expected an integer in [1, 1000], found '2.5'");
  CHECK(apply_error("sec:\n  tokens: 0\n") ==
        "cfg.yaml:2:11: sec.tokens: expected an integer in [1, 1000], found '0' (out of range)");
  CHECK(apply_error("sec:\n  tokens: [1, 2]\n") ==
        "cfg.yaml:2:11: sec.tokens: expected an integer in [1, 1000], found a list");
  CHECK(apply_error("sec:\n  tokens:\n") ==
        "cfg.yaml:2:3: sec.tokens: expected an integer in [1, 1000], found nothing");
  CHECK_THAT(apply_error("sec:\n  rate: .nan\n"), Contains("sec.rate: expected a number in [0, 1]"));
  CHECK_THAT(apply_error("sec:\n  flag: maybe\n"),
             Contains("sec.flag: expected true or false, found 'maybe'"));
  CHECK(apply_error("sec:\n  mode: fp61\n") ==
        "cfg.yaml:2:9: sec.mode: expected one of off, fp16, bf16, found 'fp61' "
        "(did you mean 'fp16'?)");
}

TEST_CASE("schema rejects duplicate keys, sections that are not maps, and bad documents",
          "[config]") {
  CHECK(apply_error("sec:\n  tokens: 1\n  tokens: 2\n") ==
        "cfg.yaml:3:3: duplicate key 'sec.tokens' (first given on line 2)");
  CHECK(apply_error("sec: 5\n") == "cfg.yaml:1:6: sec: expected a section (a map of keys), found '5'");
  CHECK(apply_error("") == "cfg.yaml: the config is empty");
  CHECK_THAT(apply_error("- a\n- b\n"), Contains("expected a map of sections at the top level"));
  CHECK(apply_error("sec:\n") == "");  // an empty section keeps its defaults
}

TEST_CASE("schema overrides use the same checks and name the --set", "[config]") {
  Sample s;
  Schema schema = bind(s);
  schema.apply_override("sec.tokens=7");
  schema.apply_override("name=");
  CHECK(s.tokens == 7);
  CHECK(s.name.empty());
  CHECK(schema.origin("sec.tokens").describe() == "--set sec.tokens=7");
  auto message = [&](const char* assignment) {
    try {
      schema.apply_override(assignment);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(message("sec.tokens=abc") ==
        "--set sec.tokens=abc: sec.tokens: expected an integer in [1, 1000], found 'abc'");
  CHECK(message("sec.tokns=1") ==
        "--set sec.tokns=1: unknown key 'sec.tokns'; did you mean 'sec.tokens'?");
  CHECK_THAT(message("sec.tokens"), Contains("expected key=value"));
  CHECK_THAT(message("sec.tokens=[1"), Contains("the value is not valid YAML"));
}

TEST_CASE("schema checks input files exist and names key and origin", "[config]") {
  nmt::test::TempDir dir;
  Sample s;
  Schema schema = bind(s);
  schema.check_input_paths();  // empty: unset, fine
  const std::string missing = (dir.path() / "nope.txt").string();
  schema.apply_document(YAML::Load("other:\n  input: " + missing + "\n"), "cfg.yaml");
  try {
    schema.check_input_paths();
    FAIL("expected a ConfigError");
  } catch (const ConfigError& e) {
    CHECK(std::string(e.what()) ==
          "cfg.yaml:2:10: other.input: file not found: '" + missing + "'");
  }
  dir.write("nope.txt", "exists now\n");
  CHECK_NOTHROW(schema.check_input_paths());
}

TEST_CASE("schema YAML output parses back to the same values", "[config]") {
  Sample s;
  Schema schema = bind(s);
  schema.apply_document(YAML::Load("name: 'a: b'\nsec:\n  tokens: 999\n  rate: 0.1\n"
                                   "  mode: fp16\nother:\n  input: '123'\n"),
                        "cfg.yaml");
  const std::string text = schema.to_yaml();
  CHECK_THAT(text, Contains("# tokens"));
  Sample back;
  Schema back_schema = bind(back);
  back_schema.apply_document(YAML::Load(text), "printed.yaml");
  CHECK(back.name == "a: b");
  CHECK(back.tokens == 999);
  CHECK(back.rate == 0.1);
  CHECK(back.mode == Mode::kFp16);
  CHECK(back.input == "123");
  CHECK(back_schema.to_yaml() == text);
}

TEST_CASE("edit distance", "[config]") {
  CHECK(nmt::config::edit_distance("", "abc") == 3);
  CHECK(nmt::config::edit_distance("kitten", "sitting") == 3);
  CHECK(nmt::config::edit_distance("max_tokens", "max_tokens") == 0);
}
