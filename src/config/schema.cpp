#include "config/schema.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "util/error.h"

namespace nmt::config {

Origin origin_of(const YAML::Node& node, const std::string& source) {
  const YAML::Mark mark = node.Mark();
  if (mark.is_null()) return {source, 0, 0};
  return {source, mark.line + 1, mark.column + 1};
}

std::string format_number(double value) {
  // Shortest text that parses back to the same double.
  return fmt::format("{}", value);
}

namespace {

std::string range_text(std::string_view kind, double min, double max, bool integral) {
  auto show = [integral](double v) {
    return integral ? fmt::format("{}", static_cast<int64_t>(v)) : format_number(v);
  };
  const double top = integral ? static_cast<double>(std::numeric_limits<int64_t>::max())
                              : std::numeric_limits<double>::max();
  const double bottom = integral ? static_cast<double>(std::numeric_limits<int64_t>::min())
                                 : std::numeric_limits<double>::lowest();
  if (min <= bottom && max >= top) return fmt::format("{}", kind);
  if (max >= top) return fmt::format("{} >= {}", kind, show(min));
  if (min <= bottom) return fmt::format("{} <= {}", kind, show(max));
  return fmt::format("{} in [{}, {}]", kind, show(min), show(max));
}

/// The last component of a key path ("max_tokens" of "data.max_tokens").
std::string_view leaf(std::string_view key) {
  size_t dot = key.rfind('.');
  return dot == std::string_view::npos ? key : key.substr(dot + 1);
}

}  // namespace

std::string Origin::describe() const {
  if (line > 0) return fmt::format("{}:{}:{}", source, line, column);
  return source;
}

std::string describe_node(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar: return "'" + node.Scalar() + "'";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a map";
    case YAML::NodeType::Null: return "nothing";
    case YAML::NodeType::Undefined: return "nothing";
  }
  return "nothing";
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = above;
    }
  }
  return row[b.size()];
}

void throw_bad_value(const Field& field, const YAML::Node& value, const Origin& origin,
                     std::string_view detail) {
  std::string message = fmt::format("{}: {}: expected {}, found {}", origin.describe(), field.key,
                                    field.expected, describe_node(value));
  if (!detail.empty()) message += fmt::format(" ({})", detail);
  throw ConfigError(message);
}

void Schema::add(Field field) {
  origins_[field.key] = Origin{"default", 0, 0};
  fields_.push_back(std::move(field));
}

void Schema::integer(std::string key, int64_t* value, int64_t min, int64_t max,
                     std::string doc) {
  Field field{std::move(key), std::move(doc),
              range_text("an integer", static_cast<double>(min), static_cast<double>(max), true)};
  field.parse = [field_copy = field, value, min, max](const YAML::Node& node,
                                                       const Origin& origin) {
    int64_t parsed = 0;
    if (!node.IsScalar() || !YAML::convert<int64_t>::decode(node, parsed))
      throw_bad_value(field_copy, node, origin);
    if (parsed < min || parsed > max) throw_bad_value(field_copy, node, origin, "out of range");
    *value = parsed;
  };
  field.print = [value] { return fmt::format("{}", *value); };
  add(std::move(field));
}

void Schema::integer_or_word(std::string key, std::optional<int64_t>* value, int64_t min,
                             int64_t max, std::string word, std::string doc) {
  Field field{std::move(key), std::move(doc),
              range_text("an integer", static_cast<double>(min), static_cast<double>(max), true) +
                  fmt::format(" or {}", word)};
  field.parse = [field_copy = field, value, min, max, word](const YAML::Node& node,
                                                            const Origin& origin) {
    if (node.IsScalar() && node.Scalar() == word) {
      *value = std::nullopt;
      return;
    }
    int64_t parsed = 0;
    if (!node.IsScalar() || !YAML::convert<int64_t>::decode(node, parsed))
      throw_bad_value(field_copy, node, origin);
    if (parsed < min || parsed > max) throw_bad_value(field_copy, node, origin, "out of range");
    *value = parsed;
  };
  field.print = [value, word] { return *value ? fmt::format("{}", **value) : word; };
  add(std::move(field));
}

void Schema::real(std::string key, double* value, double min, double max, std::string doc) {
  Field field{std::move(key), std::move(doc), range_text("a number", min, max, false)};
  field.parse = [field_copy = field, value, min, max](const YAML::Node& node,
                                                       const Origin& origin) {
    double parsed = 0;
    if (!node.IsScalar() || !YAML::convert<double>::decode(node, parsed) || !std::isfinite(parsed))
      throw_bad_value(field_copy, node, origin);
    if (parsed < min || parsed > max) throw_bad_value(field_copy, node, origin, "out of range");
    *value = parsed;
  };
  field.print = [value] { return format_number(*value); };
  add(std::move(field));
}

void Schema::boolean(std::string key, bool* value, std::string doc) {
  Field field{std::move(key), std::move(doc), "true or false"};
  field.parse = [field_copy = field, value](const YAML::Node& node, const Origin& origin) {
    bool parsed = false;
    if (!node.IsScalar() || !YAML::convert<bool>::decode(node, parsed))
      throw_bad_value(field_copy, node, origin);
    *value = parsed;
  };
  field.print = [value] { return std::string(*value ? "true" : "false"); };
  add(std::move(field));
}

void Schema::text(std::string key, std::string* value, std::string doc) {
  Field field{std::move(key), std::move(doc), "a string"};
  field.parse = [field_copy = field, value](const YAML::Node& node, const Origin& origin) {
    if (node.IsNull()) {
      value->clear();
      return;
    }
    if (!node.IsScalar()) throw_bad_value(field_copy, node, origin);
    *value = node.Scalar();
  };
  field.print = [value] { return *value; };
  add(std::move(field));
}

void Schema::input_path(std::string key, std::string* value, std::string doc) {
  text(std::move(key), value, std::move(doc));
  fields_.back().expected = "a file path";
  fields_.back().is_input_path = true;
}

const Field* Schema::find(std::string_view key) const {
  for (const Field& field : fields_)
    if (field.key == key) return &field;
  return nullptr;
}

bool Schema::is_section(std::string_view prefix) const {
  for (const Field& field : fields_) {
    if (field.key.size() > prefix.size() && field.key.compare(0, prefix.size(), prefix) == 0 &&
        field.key[prefix.size()] == '.')
      return true;
  }
  return false;
}

std::string Schema::closest_key(std::string_view key) const {
  // Compare both the full path and its last component, so "max_tokens" written at the wrong
  // level still finds "data.max_tokens".
  std::string best;
  size_t best_distance = SIZE_MAX;
  for (const Field& field : fields_) {
    size_t d = std::min(edit_distance(field.key, key), edit_distance(leaf(field.key), leaf(key)));
    if (d < best_distance) best_distance = d, best = field.key;
  }
  size_t allowed = std::max<size_t>(2, leaf(key).size() / 3);
  return best_distance <= allowed ? best : std::string();
}

std::string Schema::closest_section(std::string_view section, const YAML::Node& map) const {
  // Sections beside this one: same parent, one more component.
  const size_t dot = section.rfind('.');
  const std::string parent = dot == std::string_view::npos ? "" : std::string(section.substr(0, dot + 1));
  std::set<std::string> candidates;
  for (const Field& field : fields_) {
    if (field.key.compare(0, parent.size(), parent) != 0) continue;
    const size_t end = field.key.find('.', parent.size());
    if (end != std::string::npos) candidates.insert(field.key.substr(0, end));
  }
  // Most of the map's keys found in a candidate decide; the name breaks ties.
  std::string best;
  std::pair<int64_t, size_t> best_score{-1, SIZE_MAX};  // (keys found, edit distance)
  for (const std::string& candidate : candidates) {
    int64_t found = 0;
    for (const auto& entry : map)
      if (entry.first.IsScalar() && find(candidate + "." + entry.first.Scalar())) ++found;
    const size_t distance = edit_distance(leaf(candidate), leaf(section));
    const std::pair<int64_t, size_t> score{found, distance};
    if (score.first > best_score.first ||
        (score.first == best_score.first && score.second < best_score.second)) {
      best_score = score;
      best = candidate;
    }
  }
  if (best_score.first > 0) return best;
  return best_score.second <= std::max<size_t>(2, leaf(section).size() / 3) ? best : std::string();
}

Origin Schema::origin(std::string_view key) const {
  auto it = origins_.find(key);
  return it == origins_.end() ? Origin{"default", 0, 0} : it->second;
}

void Schema::apply_value(const Field& field, const YAML::Node& value, const Origin& origin) {
  field.parse(value, origin);
  origins_[field.key] = origin;
}

void Schema::apply_map(const YAML::Node& map, const std::string& prefix,
                       const std::string& source) {
  std::map<std::string, int> seen_at_line;
  for (const auto& entry : map) {
    const YAML::Node& key_node = entry.first;
    const YAML::Node& value = entry.second;
    const Origin key_origin = origin_of(key_node, source);
    if (!key_node.IsScalar()) {
      NMT_THROW(ConfigError, "{}: expected a key name, found {}", key_origin.describe(),
                describe_node(key_node));
    }
    const std::string key = prefix.empty() ? key_node.Scalar() : prefix + "." + key_node.Scalar();
    auto [it, inserted] = seen_at_line.emplace(key, key_origin.line);
    if (!inserted) {
      NMT_THROW(ConfigError, "{}: duplicate key '{}' (first given on line {})",
                key_origin.describe(), key, it->second);
    }
    if (const Field* field = find(key)) {
      // A missing value has no position of its own (yaml-cpp marks the next token): point at
      // its key instead.
      apply_value(*field, value, value.IsNull() ? key_origin : origin_of(value, source));
    } else if (is_section(key)) {
      if (value.IsNull()) continue;  // an empty section keeps its defaults
      if (!value.IsMap()) {
        NMT_THROW(ConfigError, "{}: {}: expected a section (a map of keys), found {}",
                  origin_of(value, source).describe(), key, describe_node(value));
      }
      apply_map(value, key, source);
    } else if (value.IsMap()) {
      // A misspelled section: suggest the section whose keys it holds, not a key that looks
      // like its name ("modle:" holding encoder_layers is model, not amp.mode).
      std::string suggestion = closest_section(key, value);
      NMT_THROW(ConfigError, "{}: unknown section '{}'{}", key_origin.describe(), key,
                suggestion.empty() ? std::string()
                                   : fmt::format("; did you mean '{}'?", suggestion));
    } else {
      std::string suggestion = closest_key(key);
      NMT_THROW(ConfigError, "{}: unknown key '{}'{}", key_origin.describe(), key,
                suggestion.empty() ? std::string()
                                   : fmt::format("; did you mean '{}'?", suggestion));
    }
  }
}

void Schema::apply_document(const YAML::Node& root, const std::string& source) {
  if (!root || root.IsNull()) NMT_THROW(ConfigError, "{}: the config is empty", source);
  if (!root.IsMap()) {
    NMT_THROW(ConfigError, "{}: expected a map of sections at the top level, found {}",
              origin_of(root, source).describe(), describe_node(root));
  }
  apply_map(root, "", source);
}

void Schema::apply_override(std::string_view assignment) {
  const std::string source = fmt::format("--set {}", assignment);
  const size_t eq = assignment.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    NMT_THROW(ConfigError, "{}: expected key=value (e.g. --set data.max_tokens=4096)", source);
  }
  const std::string key(assignment.substr(0, eq));
  const std::string text(assignment.substr(eq + 1));
  const Field* field = find(key);
  if (!field) {
    std::string suggestion = closest_key(key);
    NMT_THROW(ConfigError, "{}: unknown key '{}'{}", source, key,
              suggestion.empty() ? std::string() : fmt::format("; did you mean '{}'?", suggestion));
  }
  YAML::Node value;
  try {
    value = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    NMT_THROW(ConfigError, "{}: the value is not valid YAML: {}", source, e.msg);
  }
  apply_value(*field, value, Origin{source, 0, 0});
}

void Schema::check_input_paths() const {
  for (const Field& field : fields_) {
    if (!field.is_input_path) continue;
    const std::string path = field.print();
    if (path.empty()) continue;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
      const bool exists = std::filesystem::exists(path, ec);
      NMT_THROW(ConfigError, "{}: {}: {} '{}'{}", origin(field.key).describe(), field.key,
                exists ? "not a regular file:" : "file not found:", path,
                std::filesystem::path(path).is_absolute()
                    ? std::string()
                    : fmt::format(" (relative to the working directory {})",
                                  std::filesystem::current_path().string()));
    }
  }
}

std::string Schema::to_yaml(bool with_docs) const {
  // Top-level fields first, then one block per section in declaration order.
  std::vector<std::string> sections;
  for (const Field& field : fields_) {
    size_t dot = field.key.find('.');
    if (dot == std::string::npos) continue;
    std::string section = field.key.substr(0, dot);
    if (std::find(sections.begin(), sections.end(), section) == sections.end())
      sections.push_back(section);
  }
  YAML::Emitter out;
  out << YAML::BeginMap;
  for (const Field& field : fields_) {
    if (field.key.find('.') != std::string::npos) continue;
    out << YAML::Key << field.key << YAML::Value;
    if (field.node) out << field.node();
    else out << field.print();
    if (with_docs) out << YAML::Comment(field.doc);
  }
  for (const std::string& section : sections) emit_section(out, section, with_docs);
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

std::string Schema::section_to_yaml(std::string_view section, bool with_docs) const {
  if (!is_section(section)) return {};
  YAML::Emitter out;
  out << YAML::BeginMap;
  emit_section(out, section, with_docs);
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

void Schema::emit_section(YAML::Emitter& out, std::string_view section, bool with_docs) const {
  const std::string prefix = std::string(section) + ".";
  out << YAML::Key << std::string(section) << YAML::Value << YAML::BeginMap;
  for (const Field& field : fields_) {
    if (field.key.compare(0, prefix.size(), prefix) != 0) continue;
    out << YAML::Key << field.key.substr(prefix.size()) << YAML::Value;
    if (field.node) out << field.node();
    else out << field.print();
    if (with_docs) out << YAML::Comment(field.doc);
  }
  out << YAML::EndMap;
}

}  // namespace nmt::config
