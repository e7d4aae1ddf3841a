// Schema::corpus_list: data.train and data.valid, a list of named corpora, each a flow map
// whose keys are checked one by one (config/schema.h).
#include <cmath>
#include <cstdint>
#include <cstdlib>

#include <fmt/format.h>

#include "config/schema.h"
#include "data/language_codes.h"
#include "util/error.h"

namespace nmt::config {
namespace {

constexpr const char* kCorpusKeys[] = {"name", "src",      "tgt",     "weight",
                                       "tag",  "src_lang", "tgt_lang"};

/// The error for an unknown key k of a corpus at where, with the closest known key when near.
[[noreturn]] void throw_unknown_corpus_key(const std::string& where, const std::string& k) {
  std::string best;
  size_t best_distance = SIZE_MAX;
  for (const char* known : kCorpusKeys) {
    const size_t d = edit_distance(known, k);
    if (d < best_distance) best_distance = d, best = known;
  }
  NMT_THROW(ConfigError, "{}: unknown key '{}'{}", where, k,
            best_distance <= 2 ? "; did you mean '" + best + "'?" : std::string());
}

/// Reads the key k (value v, a scalar) of the corpus at where into corpus; a language key also
/// sets language_origin (messages about the pair of languages name the later of the two).
void read_corpus_key(const std::string& k, const YAML::Node& v, const std::string& where,
                     const std::string& source, data::CorpusOptions& corpus,
                     Origin& language_origin) {
  if (k == "name") {
    corpus.name = v.Scalar();
  } else if (k == "src") {
    corpus.src = v.Scalar();
  } else if (k == "tgt") {
    corpus.tgt = v.Scalar();
  } else if (k == "weight") {
    char* end = nullptr;
    corpus.weight = std::strtod(v.Scalar().c_str(), &end);
    NMT_CHECK(
        !v.Scalar().empty() && *end == '\0' && std::isfinite(corpus.weight) && corpus.weight > 0,
        ConfigError, "{}: weight: expected a number > 0, found '{}'", where, v.Scalar());
  } else if (k == "tag") {
    NMT_CHECK(v.Scalar() == "bt", ConfigError,
              "{}: tag: expected bt (back-translated data, tagged <BT>), found '{}'", where,
              v.Scalar());
    corpus.tag = data::CorpusTag::kBackTranslation;
  } else if (k == "src_lang" || k == "tgt_lang") {
    NMT_CHECK(data::is_language_code(v.Scalar()), ConfigError, "{}: {}: expected {}, found '{}'",
              where, k, data::kLanguageCodeForms, v.Scalar());
    (k == "src_lang" ? corpus.src_lang : corpus.tgt_lang) = v.Scalar();
    language_origin = origin_of(v, source);
  } else {
    throw_unknown_corpus_key(where, k);
  }
}

/// The i-th corpus of the list key, item, read key by key and checked as a whole: a name that
/// is a word, both sides given, two different languages.
data::CorpusOptions parse_corpus(const YAML::Node& item, const std::string& key, size_t i,
                                 const std::string& source) {
  const std::string where = fmt::format("{}: {}[{}]", origin_of(item, source).describe(), key, i);
  NMT_CHECK(item.IsMap(), ConfigError, "{}: expected a map {{name, src, tgt, weight}}, found {}",
            where, describe_node(item));
  data::CorpusOptions corpus;
  Origin language_origin;  // of the later of src_lang and tgt_lang
  for (const auto& entry : item) {
    const std::string k = entry.first.Scalar();
    const YAML::Node& v = entry.second;
    NMT_CHECK(v.IsScalar(), ConfigError, "{}: {}: expected a scalar, found {}", where, k,
              describe_node(v));
    read_corpus_key(k, v, where, source, corpus, language_origin);
  }
  NMT_CHECK(!corpus.name.empty() &&
                corpus.name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                              "0123456789_-.") == std::string::npos,
            ConfigError,
            "{}: name: expected a word of letters, digits, '_', '-' or '.', found '{}'", where,
            corpus.name);
  NMT_CHECK(!corpus.src.empty() && !corpus.tgt.empty(), ConfigError,
            "{}: corpus {} needs both src and tgt", where, corpus.name);
  // A pair is of two languages: the same code twice is a slip in one of the two keys.
  NMT_CHECK(corpus.src_lang.empty() || corpus.src_lang != corpus.tgt_lang, ConfigError,
            "{}: {}[{}] ({}): src_lang and tgt_lang are both '{}'; a pair needs two "
            "different languages",
            language_origin.describe(), key, i, corpus.name, corpus.src_lang);
  return corpus;
}

/// A corpus as a flow map, as --print-config shows it and config_hash hashes it.
YAML::Node corpus_node(const data::CorpusOptions& corpus) {
  YAML::Node item;
  item["name"] = corpus.name;
  item["src"] = corpus.src;
  item["tgt"] = corpus.tgt;
  item["weight"] = format_number(corpus.weight);
  // Only when set, so configs without tags print (and hash) as before.
  if (corpus.tag == data::CorpusTag::kBackTranslation) item["tag"] = "bt";
  if (!corpus.src_lang.empty()) item["src_lang"] = corpus.src_lang;
  if (!corpus.tgt_lang.empty()) item["tgt_lang"] = corpus.tgt_lang;
  return item;
}

}  // namespace

void Schema::corpus_list(std::string key, std::vector<data::CorpusOptions>* value, std::string doc) {
  Field field{std::move(key), std::move(doc),
              "a list of corpora, each {name: N, src: FILE, tgt: FILE, weight: W, tag: bt, "
              "src_lang: L, tgt_lang: L}"};
  field.parse = [field_copy = field, value](const YAML::Node& node, const Origin& origin) {
    value->clear();
    if (node.IsNull()) return;
    if (!node.IsSequence()) throw_bad_value(field_copy, node, origin);
    for (size_t i = 0; i < node.size(); ++i) {
      const YAML::Node item = node[i];
      data::CorpusOptions corpus = parse_corpus(item, field_copy.key, i, origin.source);
      const std::string where =
          fmt::format("{}: {}[{}]", origin_of(item, origin.source).describe(), field_copy.key, i);
      for (const data::CorpusOptions& earlier : *value)
        NMT_CHECK(earlier.name != corpus.name, ConfigError, "{}: the name {} is given twice", where,
                  corpus.name);
      value->push_back(std::move(corpus));
    }
  };
  field.node = [value] {
    YAML::Node list(YAML::NodeType::Sequence);
    for (const data::CorpusOptions& corpus : *value) list.push_back(corpus_node(corpus));
    list.SetStyle(YAML::EmitterStyle::Flow);
    return list;
  };
  field.print = [node = field.node] {
    YAML::Emitter out;
    out << node();
    return std::string(out.c_str());
  };
  add(std::move(field));
}

}  // namespace nmt::config
