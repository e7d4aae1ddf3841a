#include "data/lang_tags.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

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

namespace {

/// The language code inside an imported vocabulary's language token: "de" of `__de__`,
/// "deu" of `>>deu<<`, "deu_Latn" of `deu_Latn`.
std::string_view code_of_token(HfTokenizerKind kind, std::string_view token) {
  switch (kind) {
    case HfTokenizerKind::kMarian:
    case HfTokenizerKind::kM2M100:
      return token.substr(2, token.size() - 4);
    case HfTokenizerKind::kNllb:
      return token;
  }
  return token;
}

}  // namespace

std::string language_tag(const Vocab& vocab, std::string_view code, const std::string& needed_by) {
  const TokenTable* table = vocab.hf_table();
  if (table == nullptr) return language_tag(code);
  // A token matches the code itself ("deu_Latn"), or by its language part before a script
  // ("deu" of "deu_Latn", "zho" of ">>zho_Hans<<") equal to the code or its other ISO 639 form.
  const std::string_view paired = paired_language_code(code);
  std::vector<std::string> exact, matches, known;
  for (int32_t id : table->language_ids) {
    const std::string& token = table->tokens[static_cast<size_t>(id)];
    const std::string_view token_code = code_of_token(table->kind, token);
    const std::string_view language = token_code.substr(0, token_code.find('_'));
    known.push_back(token);
    if (token_code == code) exact.push_back(token);
    if (language == code || (!paired.empty() && language == paired)) matches.push_back(token);
  }
  if (exact.size() == 1) return exact.front();
  NMT_CHECK(!matches.empty(), DataError,
            "{}: the {} vocabulary has no language code for {} (needed by {}); its codes: {}",
            vocab.model_path().string(), hf_tokenizer_name(table->kind), code, needed_by,
            known.empty() ? std::string("none") : fmt::format("{}", fmt::join(known, " ")));
  NMT_CHECK(matches.size() == 1, DataError,
            "{}: the {} vocabulary has several language codes for {} (needed by {}): {}",
            vocab.model_path().string(), hf_tokenizer_name(table->kind), code, needed_by,
            fmt::join(matches, " "));
  return matches.front();
}

std::vector<std::string> vocabulary_languages(const Vocab& vocab) {
  std::vector<std::string> out;
  const TokenTable* table = vocab.hf_table();
  if (table == nullptr) return out;
  for (int32_t id : table->language_ids)
    out.emplace_back(code_of_token(table->kind, table->tokens[static_cast<size_t>(id)]));
  return out;
}

std::vector<std::string> source_tags(const DataOptions& options, const CorpusOptions& corpus,
                                     const Vocab& vocab) {
  std::vector<std::string> tags;
  if (options.lang_tags == LangTags::kTarget) {
    const bool source_code = vocab.language_placement() == LanguageCodePlacement::kSourceAndTarget;
    tags.push_back(language_tag(
        vocab, source_code ? corpus.src_lang : corpus.tgt_lang,
        fmt::format("data entry {} ({})", corpus.name, source_code ? "src_lang" : "tgt_lang")));
  }
  if (corpus.tag == CorpusTag::kBackTranslation) tags.emplace_back(kBackTranslationTag);
  return tags;
}

std::vector<std::string> target_tags(const DataOptions& options, const CorpusOptions& corpus,
                                     const Vocab& vocab) {
  if (options.lang_tags != LangTags::kTarget ||
      vocab.language_placement() != LanguageCodePlacement::kSourceAndTarget)
    return {};
  return {language_tag(vocab, corpus.tgt_lang, "data entry " + corpus.name + " (tgt_lang)")};
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
