#include "config/config_reference.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "config/run_schema.h"
#include "util/error.h"

namespace nmt::config {
namespace {

/// Text for a Markdown table cell outside code spans: `|` would end the cell, `<x>` would be
/// read as an HTML tag and vanish, `*` could start emphasis.
std::string cell(std::string_view text) {
  std::string out;
  for (char ch : text) {
    switch (ch) {
      case '|': out += "\\|"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '*': out += "\\*"; break;
      default: out += ch;
    }
  }
  return out;
}

/// A default value as a code span (`|` still escaped: GitHub splits cells before code spans).
std::string value_cell(const std::string& value) {
  if (value.empty()) return "empty";
  std::string escaped;
  for (char ch : value) escaped += ch == '|' ? std::string("\\|") : std::string(1, ch);
  return "`" + escaped + "`";
}

}  // namespace

std::string config_reference_markdown() {
  // The defaults a config file starts from; the file name only shapes run_dir's default.
  RunConfig defaults = default_run_config("<config name>.yaml");
  const Schema schema = bind(defaults);
  std::vector<std::string> sections{""};
  for (const Field& field : schema.fields()) {
    const size_t dot = field.key.find('.');
    const std::string section = dot == std::string::npos ? "" : field.key.substr(0, dot);
    if (std::find(sections.begin(), sections.end(), section) == sections.end())
      sections.push_back(section);
  }
  std::string out;
  for (const std::string& section : sections) {
    out += fmt::format("\n### {}\n\n", section.empty() ? "Top level" : "`" + section + "`");
    out += "| key | default | expected | what it is |\n| --- | --- | --- | --- |\n";
    for (const Field& field : schema.fields()) {
      const size_t dot = field.key.find('.');
      const std::string of = dot == std::string::npos ? "" : field.key.substr(0, dot);
      if (of != section) continue;
      out += fmt::format("| `{}` | {} | {} | {} |\n", field.key, value_cell(field.print()),
                         cell(field.expected), cell(field.doc));
    }
  }
  out += "\n";
  return out;
}

std::string generated_reference_block(std::string_view page, std::string_view source) {
  const auto line_start = [&](std::string_view marker, size_t from) {
    for (size_t at = page.find(marker, from); at != std::string_view::npos;
         at = page.find(marker, at + 1))
      if (at == 0 || page[at - 1] == '\n') return at;
    return std::string_view::npos;
  };
  const size_t begin = line_start(kReferenceBegin, 0);
  NMT_CHECK(begin != std::string_view::npos, ConfigError, "{}: no line starting with '{}'", source,
            kReferenceBegin);
  const size_t body = page.find('\n', begin);
  NMT_CHECK(body != std::string_view::npos, ConfigError, "{}: nothing after the line '{}'", source,
            kReferenceBegin);
  const size_t end = line_start(kReferenceEnd, body + 1);
  NMT_CHECK(end != std::string_view::npos, ConfigError,
            "{}: no line starting with '{}' after the one starting with '{}'", source,
            kReferenceEnd, kReferenceBegin);
  return std::string(page.substr(body + 1, end - body - 1));
}

}  // namespace nmt::config
