#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "config/config_reference.h"
#include "config/run_schema.h"
#include "test_support.h"
#include "util/error.h"

using Catch::Matchers::Contains;
using nmt::config::config_reference_markdown;
using nmt::config::generated_reference_block;

namespace {

/// The first line where the two texts differ, as "line N: 'a' vs 'b'".
std::string first_difference(const std::string& a, const std::string& b) {
  std::istringstream sa(a), sb(b);
  std::string la, lb;
  for (int line = 1;; ++line) {
    const bool more_a = static_cast<bool>(std::getline(sa, la));
    const bool more_b = static_cast<bool>(std::getline(sb, lb));
    if (!more_a && !more_b) return "none";
    if (!more_a || !more_b || la != lb)
      return "line " + std::to_string(line) + " of the block: '" + (more_a ? la : "(end)") +
             "' in the page, '" + (more_b ? lb : "(end)") + "' generated";
  }
}

/// Cell separators of a table row: pipes not escaped with a backslash.
int unescaped_pipes(const std::string& row) {
  int pipes = 0;
  for (size_t i = 0; i < row.size(); ++i)
    if (row[i] == '|' && (i == 0 || row[i - 1] != '\\')) ++pipes;
  return pipes;
}

}  // namespace

TEST_CASE("config reference: docs/configuration.md holds the generated reference", "[config]") {
  const std::string path = NMT_SOURCE_DIR "/docs/configuration.md";
  const std::string page = nmt::test::read_file(path);
  REQUIRE_FALSE(page.empty());
  const std::string in_page = generated_reference_block(page, path);
  const std::string generated = config_reference_markdown();
  INFO("docs/configuration.md's reference is not what the schema generates ("
       << first_difference(in_page, generated)
       << "); regenerate it: scripts/gen-config-reference.sh (needs build/nmt-train)");
  // A bool, so that a failure prints the hint above rather than both texts in full.
  const bool current = in_page == generated;
  CHECK(current);
}

TEST_CASE("config reference: every key has one row with its default", "[config]") {
  const std::string markdown = config_reference_markdown();
  nmt::config::RunConfig defaults = nmt::config::default_run_config("x.yaml");
  const nmt::config::Schema schema = nmt::config::bind(defaults);
  REQUIRE(schema.fields().size() > 50);
  for (const nmt::config::Field& field : schema.fields()) {
    INFO(field.key);
    const std::string start = "| `" + field.key + "` |";
    const size_t at = markdown.find(start);
    REQUIRE(at != std::string::npos);
    CHECK(markdown.find(start, at + 1) == std::string::npos);
  }
  CHECK_THAT(markdown, Contains("| `data.max_tokens` | `4096` | an integer"));
  CHECK_THAT(markdown, Contains("| `amp.mode` | `auto` | one of off, fp16, bf16, auto |"));
  CHECK_THAT(markdown, Contains("| `run_dir` | `runs/<config name>` |"));
}

TEST_CASE("config reference: each row has four cells whatever its doc holds", "[config]") {
  // Docs hold <run_dir>, <BT>, <2xx> and the like: unescaped, Markdown would drop them as tags.
  const std::string markdown = config_reference_markdown();
  CHECK_THAT(markdown, Contains("&lt;run_dir&gt;/logs/rank&lt;R&gt;.log"));
  std::istringstream lines(markdown);
  std::string line;
  int rows = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("| `", 0) != 0) continue;
    ++rows;
    INFO(line);
    CHECK(unescaped_pipes(line) == 5);
  }
  CHECK(rows > 50);
}

TEST_CASE("config reference: a page without its markers is an error naming the page",
          "[config]") {
  CHECK_THROWS_WITH(generated_reference_block("# Configuration\n\nno block\n", "docs/x.md"),
                    Contains("docs/x.md") && Contains("<!-- BEGIN config-reference"));
  CHECK_THROWS_WITH(
      generated_reference_block("<!-- BEGIN config-reference -->\n| a |\n", "docs/x.md"),
      Contains("docs/x.md") && Contains("<!-- END config-reference"));
  CHECK(generated_reference_block("intro\n<!-- BEGIN config-reference x -->\nA\nB\n"
                                  "<!-- END config-reference -->\nafter\n",
                                  "p") == "A\nB\n");
}
