#include "data/lang_tags.h"

#include <fmt/format.h>

#include "data/vocab.h"
#include "util/error.h"

namespace nmt::data {

std::string language_tag(std::string_view code) { return fmt::format("<2{}>", code); }

bool is_tag_piece(std::string_view piece) {
  if (piece == kBackTranslationTag) return true;
  return piece.size() > 3 && piece.substr(0, 2) == "<2" && piece.back() == '>' &&
         is_language_code(piece.substr(2, piece.size() - 3));
}

std::vector<std::string> run_languages(const DataOptions& options) {
  return corpus_languages(options.train);
}

std::string pair_label(const CorpusOptions& corpus) {
  if (corpus.src_lang.empty() && corpus.tgt_lang.empty()) return "";
  return corpus.src_lang + "-" + corpus.tgt_lang;
}

std::vector<std::string> required_tags(const DataOptions& options) {
  std::vector<std::string> tags;
  if (options.lang_tags == LangTags::kTarget)
    for (const std::string& code : run_languages(options)) tags.push_back(language_tag(code));
  for (const CorpusOptions& corpus : options.train)
    if (corpus.tag == CorpusTag::kBackTranslation) {
      tags.emplace_back(kBackTranslationTag);
      break;
    }
  return tags;
}

std::vector<std::string> source_tags(const DataOptions& options, const CorpusOptions& corpus) {
  std::vector<std::string> tags;
  if (options.lang_tags == LangTags::kTarget) tags.push_back(language_tag(corpus.tgt_lang));
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
              "with it as a control symbol (nmt-train does when it trains one), or leave "
              "data.spm_model unset",
              vocab.model_path().string(), tag, needed_by);
    // A normal piece would come out of text too: the tag must be unreachable from it.
    NMT_CHECK(vocab.is_control(*id), DataError,
              "{}: the SentencePiece model's piece {} (needed by {}) is an ordinary piece, which "
              "text encodes to; a tag must be a control symbol (--control_symbols={}), or leave "
              "data.spm_model unset",
              vocab.model_path().string(), tag, needed_by, tag);
    ids.push_back(*id);
  }
  return ids;
}

}  // namespace nmt::data
