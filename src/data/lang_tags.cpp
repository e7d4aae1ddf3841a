#include "data/lang_tags.h"

#include <fmt/format.h>

#include "data/vocab.h"
#include "util/error.h"

namespace nmt::data {

std::vector<std::string> required_tags(const DataOptions& options) {
  std::vector<std::string> tags;
  for (const CorpusOptions& corpus : options.train)
    if (corpus.tag == CorpusTag::kBackTranslation) {
      tags.emplace_back(kBackTranslationTag);
      break;
    }
  return tags;
}

std::vector<std::string> source_tags(const DataOptions& /*options*/, const CorpusOptions& corpus) {
  std::vector<std::string> tags;
  if (corpus.tag == CorpusTag::kBackTranslation) tags.emplace_back(kBackTranslationTag);
  return tags;
}

std::vector<int32_t> tag_ids(const Vocab& vocab, const std::vector<std::string>& tags,
                             const std::string& needed_by) {
  std::vector<int32_t> ids;
  for (const std::string& tag : tags) {
    const std::optional<int32_t> id = vocab.piece_id(tag);
    NMT_CHECK(id.has_value(), DataError,
              "{}: the SentencePiece model has no piece {} (needed by {}); train the vocabulary "
              "with it as a user-defined symbol (nmt-train does when it trains one), or leave "
              "data.spm_model unset",
              vocab.model_path().string(), tag, needed_by);
    ids.push_back(*id);
  }
  return ids;
}

}  // namespace nmt::data
