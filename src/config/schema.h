#pragma once
// A typed schema over configuration values: each field is bound to a member of an Options
// struct, with its key path ("data.max_tokens"), a one-line doc, and how to read, check and
// print it. YAML documents and --set overrides are applied through it, so every source gets
// the same checks and the same error messages (file:line:column, key, expected vs found).
//
// Internal to config/ (and its tests); the rest of the program sees typed Options only.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "data/data_options.h"

namespace nmt::config {

/// Where a value came from, for messages: a YAML file position, an override, or the default.
struct Origin {
  std::string source;  ///< file path, "--set key=value", or "default"
  int line = 0;        ///< 1-based line in source; 0 when not a file position
  int column = 0;      ///< 1-based column in source
  /// "run.yaml:3:5", "--set data.max_tokens=x" or "default".
  std::string describe() const;
};

/// One configurable value.
struct Field {
  std::string key;          ///< full key path, e.g. "data.max_tokens"
  std::string doc;          ///< one line: what it is, with its unit
  std::string expected;     ///< what a valid value looks like, e.g. "an integer >= 1"
  bool is_input_path = false;  ///< names a file that must exist when non-empty
  /// Reads, checks and stores a value; throws ConfigError naming origin and key.
  std::function<void(const YAML::Node&, const Origin&)> parse;
  /// The current value as a YAML scalar text (round-trips through parse).
  std::function<std::string()> print;
  /// For values that are not scalars (lists): the value as a YAML node, which to_yaml writes
  /// instead of print()'s text.
  std::function<YAML::Node()> node;
};

/// The set of fields of one config object, in declaration order.
class Schema {
 public:
  /// Integer in [min, max].
  void integer(std::string key, int64_t* value, int64_t min, int64_t max, std::string doc);
  /// Integer in [min, max], or the word `word`, stored as nullopt and printed back as the word
  /// (a mode is a type: no number stands for the word).
  void integer_or_word(std::string key, std::optional<int64_t>* value, int64_t min, int64_t max,
                       std::string word, std::string doc);
  /// Finite real in [min, max].
  void real(std::string key, double* value, double min, double max, std::string doc);
  void boolean(std::string key, bool* value, std::string doc);
  /// Free text; an empty value is allowed.
  void text(std::string key, std::string* value, std::string doc);
  /// A file the run reads; empty means unset, otherwise it must exist (checked by
  /// check_input_paths once all sources are applied).
  void input_path(std::string key, std::string* value, std::string doc);
  /// A list of named corpora, each a map {name, src, tgt, weight} (weight optional, 1 by
  /// default); null or [] is the empty list. Names must be unique words (they name token
  /// cache files); file existence is checked by the caller.
  void corpus_list(std::string key, std::vector<data::CorpusOptions>* value, std::string doc);
  /// One of a fixed set of names, stored as an enum. Where "off" is a name, YAML 1.1's false
  /// (what PyYAML writes for an unquoted off) also reads as off.
  template <class Enum>
  void choice(std::string key, Enum* value, std::vector<std::pair<std::string, Enum>> names,
              std::string doc);

  /// Applies a whole YAML document from `source` (a file path, for messages). Throws
  /// ConfigError on unknown or duplicate keys, wrong types and out-of-range values.
  void apply_document(const YAML::Node& root, const std::string& source);
  /// Applies one "key=value" override (value in YAML syntax), as given to --set.
  void apply_override(std::string_view assignment);
  /// Throws ConfigError for the first non-empty input path that does not exist, naming the
  /// path, the key and where the key was set.
  void check_input_paths() const;

  /// The field with this full key, or nullptr.
  const Field* find(std::string_view key) const;
  /// The closest valid key to a misspelt one ("" when nothing is close).
  std::string closest_key(std::string_view key) const;
  /// The known section closest to an unknown one holding `map`: the one that has most of its
  /// keys, else the nearest name; "" when none is close.
  std::string closest_section(std::string_view section, const YAML::Node& map) const;
  /// Where the field's current value came from.
  Origin origin(std::string_view key) const;
  /// The effective values as YAML, one section per component, each field with its doc as a
  /// comment (with_docs); parsing it back yields the same values.
  std::string to_yaml(bool with_docs = true) const;
  /// One section of to_yaml's text ("model:\n  d_model: 512\n..."), exactly as it appears
  /// there; "" for a section the schema does not have.
  std::string section_to_yaml(std::string_view section, bool with_docs = true) const;
  const std::vector<Field>& fields() const { return fields_; }

 private:
  void add(Field field);
  bool is_section(std::string_view prefix) const;
  /// Writes `section` (its key, then its fields as a map) into an open map of `out`.
  void emit_section(YAML::Emitter& out, std::string_view section, bool with_docs) const;
  void apply_map(const YAML::Node& map, const std::string& prefix, const std::string& source);
  void apply_value(const Field& field, const YAML::Node& value, const Origin& origin);

  std::vector<Field> fields_;
  std::map<std::string, Origin, std::less<>> origins_;
};

/// Throws the ConfigError for a value that is not what `field` expects.
[[noreturn]] void throw_bad_value(const Field& field, const YAML::Node& value,
                                  const Origin& origin, std::string_view detail = {});
/// Where `node` of a YAML document read from `source` is (line and column 0 when unknown).
Origin origin_of(const YAML::Node& node, const std::string& source);
/// The shortest text of `value` that parses back to the same double.
std::string format_number(double value);
/// Text of a scalar, or a description ("a map", "a list", "nothing") of any other node.
std::string describe_node(const YAML::Node& node);
/// Levenshtein edit distance.
size_t edit_distance(std::string_view a, std::string_view b);

template <class Enum>
void Schema::choice(std::string key, Enum* value,
                    std::vector<std::pair<std::string, Enum>> names, std::string doc) {
  std::string expected = "one of";
  for (size_t i = 0; i < names.size(); ++i) expected += (i ? ", " : " ") + names[i].first;
  Field field;
  field.key = std::move(key);
  field.doc = std::move(doc);
  field.expected = std::move(expected);
  field.parse = [field_key = field.key, field_expected = field.expected, value, names](
                    const YAML::Node& node, const Origin& origin) {
    Field self{field_key, "", field_expected, false, nullptr, nullptr};
    if (!node.IsScalar()) throw_bad_value(self, node, origin);
    const std::string& text = node.Scalar();
    std::string best;
    size_t best_distance = SIZE_MAX;
    // YAML 1.1 writers (PyYAML among them) turn an unquoted `off` into `false`: read it back
    // as off wherever off is a choice.
    const bool yaml11_off = text == "false" || text == "False" || text == "FALSE";
    for (const auto& [name, enum_value] : names) {
      if (name == text || (yaml11_off && name == "off")) {
        *value = enum_value;
        return;
      }
      size_t d = edit_distance(name, text);
      if (d < best_distance) best_distance = d, best = name;
    }
    throw_bad_value(self, node, origin,
                    best_distance <= 2 ? "did you mean '" + best + "'?" : std::string());
  };
  field.print = [value, names] {
    for (const auto& [name, enum_value] : names)
      if (enum_value == *value) return name;
    return std::string("?");
  };
  add(std::move(field));
}

}  // namespace nmt::config
