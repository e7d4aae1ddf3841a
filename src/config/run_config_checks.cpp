#include "config/run_config_checks.h"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "data/language_codes.h"
#include "util/error.h"

namespace nmt::config {
namespace {

/// Where `key` was set, for messages: its file:line:column or --set, or `file` (the config
/// that should have set it) for a key left at its default.
std::string where_set(const Schema& s, const std::filesystem::path& file, const char* key) {
  const Origin origin = s.origin(key);
  return origin.source == "default" ? file.string() : origin.describe();
}

/// The language keys of data.train and data.valid entries, data.lang_tags and
/// train.best_set; `where(key)` names the file (and line) that set a key.
template <class Where>
void validate_languages(const RunConfig& c, const Where& where) {
  const data::DataOptions& d = c.data;
  const bool tags = d.lang_tags == data::LangTags::kTarget;
  NMT_CHECK(!tags || !d.train.empty(), ConfigError,
            "{}: data.lang_tags: target needs the corpora in data.train, each with src_lang and "
            "tgt_lang (data.train_src/train_tgt name no languages)",
            where("data.lang_tags"));
  NMT_CHECK(!tags || d.valid_src.empty(), ConfigError,
            "{}: data.lang_tags: target needs the validation sets in data.valid, each with "
            "src_lang and tgt_lang (data.valid_src names no languages)",
            where("data.lang_tags"));
  const std::vector<std::string> languages = data::corpus_languages(d.train);
  for (const char* key : {"data.train", "data.valid"}) {
    const auto& entries = std::string(key) == "data.train" ? d.train : d.valid;
    for (const data::CorpusOptions& e : entries) {
      const bool one = e.src_lang.empty() != e.tgt_lang.empty();
      NMT_CHECK(!one, ConfigError, "{}: {} entry {}: {} is set but {} is not; give both or neither",
                where(key), key, e.name, e.src_lang.empty() ? "tgt_lang" : "src_lang",
                e.src_lang.empty() ? "src_lang" : "tgt_lang");
      NMT_CHECK(!tags || !e.src_lang.empty(), ConfigError,
                "{}: {} entry {}: src_lang and tgt_lang are required with data.lang_tags: target",
                where(key), key, e.name);
      if (std::string(key) == "data.valid" && !e.tgt_lang.empty()) {
        for (const std::string* code : {&e.src_lang, &e.tgt_lang})
          NMT_CHECK(std::find(languages.begin(), languages.end(), *code) != languages.end(),
                    ConfigError,
                    "{}: data.valid entry {}: language {} is not one of data.train's ({})",
                    where(key), e.name, *code,
                    languages.empty() ? std::string("none") : fmt::format("{}", fmt::join(languages, ", ")));
      }
    }
  }
  const std::string& best = c.train.best_set;
  if (!best.empty() && best != train::kMeanOfSets) {
    std::string names;
    bool found = false;
    for (const data::CorpusOptions& set : d.valid) {
      names += (names.empty() ? "" : ", ") + set.name;
      found = found || set.name == best;
    }
    NMT_CHECK(found, ConfigError,
              "{}: train.best_set: expected mean or the name of a data.valid set ({}), found '{}'",
              where("train.best_set"), names.empty() ? std::string("none given") : names, best);
  }
}

/// data.train or data.train_src/train_tgt, one of them, and the corpora's files exist.
template <class Where>
void validate_training_corpora(const RunConfig& c, const Where& where) {
  if (!c.data.train.empty()) {
    NMT_CHECK(c.data.train_src.empty() && c.data.train_tgt.empty(), ConfigError,
              "{}: data.train and data.train_src/train_tgt are both set; give the corpora in "
              "data.train only (set data.train_src and data.train_tgt to null)",
              where("data.train"));
    for (const data::CorpusOptions& corpus : c.data.train) {
      for (const std::string* path : {&corpus.src, &corpus.tgt}) {
        std::error_code ec;
        NMT_CHECK(std::filesystem::is_regular_file(*path, ec), ConfigError,
                  "{}: data.train corpus {}: file not found: '{}'", where("data.train"),
                  corpus.name, *path);
      }
    }
  } else if (c.data.train_src.empty() || c.data.train_tgt.empty()) {
    const char* key = c.data.train_src.empty() ? "data.train_src" : "data.train_tgt";
    NMT_THROW(ConfigError, "{}: {} is required (a training text file), but it is not set", where(key),
              key);
  }
}

/// data.valid or data.valid_src/valid_tgt, not both; a set has no weight or tag, and its files
/// exist.
template <class Where>
void validate_validation_sets(const RunConfig& c, const Where& where) {
  if (!c.data.valid.empty()) {
    NMT_CHECK(c.data.valid_src.empty() && c.data.valid_tgt.empty(), ConfigError,
              "{}: data.valid and data.valid_src/valid_tgt are both set; give the validation sets "
              "in data.valid only (set data.valid_src and data.valid_tgt to null)",
              where("data.valid"));
    for (const data::CorpusOptions& set : c.data.valid) {
      NMT_CHECK(set.weight == 1.0, ConfigError,
                "{}: data.valid set {}: a validation set has no weight (found {})",
                where("data.valid"), set.name, set.weight);
      NMT_CHECK(set.tag == data::CorpusTag::kNone, ConfigError,
                "{}: data.valid set {}: tag: a validation set has no tag (tag: bt marks "
                "back-translated training data)",
                where("data.valid"), set.name);
      for (const std::string* path : {&set.src, &set.tgt}) {
        std::error_code ec;
        NMT_CHECK(std::filesystem::is_regular_file(*path, ec), ConfigError,
                  "{}: data.valid set {}: file not found: '{}'", where("data.valid"), set.name,
                  *path);
      }
    }
  }
}

}  // namespace

void validate_run_config(const RunConfig& c, const Schema& s, const std::filesystem::path& file) {
  auto where = [&](const char* key) { return where_set(s, file, key); };
  validate_training_corpora(c, where);
  validate_validation_sets(c, where);
  validate_languages(c, where);
  if (c.data.valid_src.empty() != c.data.valid_tgt.empty()) {
    const char* set = c.data.valid_src.empty() ? "data.valid_tgt" : "data.valid_src";
    const char* unset = c.data.valid_src.empty() ? "data.valid_src" : "data.valid_tgt";
    NMT_THROW(ConfigError, "{}: {} is set but {} is not; give both or neither", where(set), set,
              unset);
  }
  if (c.model.d_model % c.model.heads != 0) {
    NMT_THROW(ConfigError, "{}: model.heads ({}) must divide model.d_model ({})",
              where("model.heads"), c.model.heads, c.model.d_model);
  }
  // Fine-tuning takes the vocabularies of the model it starts from, which decide: an imported
  // Marian model has two SentencePiece models over one id table, and one embedding table.
  if (c.model.tie_embeddings == model::TiedEmbeddings::kAll && !c.data.joint_vocab &&
      c.train.init_from.empty()) {
    NMT_THROW(ConfigError,
              "{}: model.tie_embeddings 'all' shares source and target embeddings, which needs "
              "data.joint_vocab: true (found false)",
              where("data.joint_vocab"));
  }
  // A sentence of max_len pieces plus BOS/EOS must fit in one batch, or it could never train.
  if (c.data.max_tokens && *c.data.max_tokens < c.data.max_len + 2) {
    NMT_THROW(ConfigError,
              "{}: data.max_tokens ({}) is smaller than the longest allowed sentence, "
              "data.max_len + 2 ({})",
              where("data.max_tokens"), *c.data.max_tokens, c.data.max_len + 2);
  }
  if (!c.data.max_tokens && c.data.auto_max_tokens_limit < c.data.max_len + 2) {
    NMT_THROW(ConfigError,
              "{}: data.auto_max_tokens_limit ({}) is smaller than the longest allowed sentence, "
              "data.max_len + 2 ({})",
              where("data.auto_max_tokens_limit"), c.data.auto_max_tokens_limit, c.data.max_len + 2);
  }
  if (c.data.max_len + 2 > c.model.max_positions) {
    NMT_THROW(ConfigError, "{}: data.max_len + 2 ({}) exceeds model.max_positions ({})",
              where("data.max_len"), c.data.max_len + 2, c.model.max_positions);
  }
  if (c.train.best_metric != train::BestMetric::kLoss && !c.train.valid_translate) {
    NMT_THROW(ConfigError, "{}: train.best_metric {} needs train.valid_translate: true",
              where("train.best_metric"),
              c.train.best_metric == train::BestMetric::kBleu ? "bleu" : "chrf");
  }
  if (c.run_dir.empty()) NMT_THROW(ConfigError, "{}: run_dir must not be empty", where("run_dir"));
  s.check_input_paths();
}

std::vector<std::string> ineffective_settings(const RunConfig& c, const Schema& s,
                                              const std::filesystem::path& file) {
  std::vector<std::string> warnings;
  const double t = c.data.sampling_temperature;
  if (t != 1.0 && c.data.train.size() <= 1) {  // none: the one corpus train_src/train_tgt
    warnings.push_back(fmt::format(
        "{}: data.sampling_temperature {} has no effect with one training corpus (it reshapes "
        "the shares of several data.train corpora); the corpus is drawn by weight x pairs",
        where_set(s, file, "data.sampling_temperature"), t));
  }
  const train::TrainOptions& tr = c.train;
  if (tr.schedule == train::LrSchedule::kCosine && tr.max_steps <= tr.warmup_steps) {
    warnings.push_back(fmt::format(
        "{}: train.schedule cosine decays from the end of warm-up to train.max_steps, but "
        "max_steps is {} (warmup_steps {}): the learning rate stays constant after warm-up",
        where_set(s, file, "train.schedule"), tr.max_steps, tr.warmup_steps));
  }
  return warnings;
}

}  // namespace nmt::config
