#include "decode/language_prefixes.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "data/lang_tags.h"
#include "util/error.h"

namespace nmt::decode {

LanguagePrefixes language_prefixes(const checkpoint::RunMetadata& meta,
                                   const TranslateOptions& options, const data::Vocab& src_vocab,
                                   const data::Vocab& tgt_vocab, const std::string& name) {
  const std::string& tgt_lang = options.tgt_lang;
  const std::string& src_lang = options.src_lang;
  if (!meta.target_lang_tags) {
    NMT_CHECK(tgt_lang.empty(), ConfigError,
              "--tgt-lang {}: {} is not a multilingual model (trained without data.lang_tags: "
              "target); leave --tgt-lang out",
              tgt_lang, name);
    NMT_CHECK(src_lang.empty(), ConfigError,
              "--src-lang {}: {} is not a multilingual model; leave --src-lang out", src_lang,
              name);
    return {};
  }
  const bool imported = src_vocab.hf_table() != nullptr;
  const std::string known =
      imported ? fmt::format(
                     "{} languages of its vocabulary, e.g. {}", meta.languages.size(),
                     fmt::join(meta.languages.begin(),
                               meta.languages.begin() + std::min<size_t>(5, meta.languages.size()),
                               ", "))
               : fmt::format("one of {}", fmt::join(meta.languages, ", "));
  NMT_CHECK(!tgt_lang.empty(), ConfigError,
            "{} is a multilingual model: give the target language with --tgt-lang ({})", name,
            known);
  NMT_CHECK(imported || std::find(meta.languages.begin(), meta.languages.end(), tgt_lang) !=
                            meta.languages.end(),
            ConfigError, "--tgt-lang {}: not a language of {} (known: {})", tgt_lang, name,
            fmt::join(meta.languages, ", "));
  const std::string tgt_needed_by = "--tgt-lang " + tgt_lang;
  LanguagePrefixes out;
  if (src_vocab.language_placement() == data::LanguageCodePlacement::kTargetInSource) {
    NMT_CHECK(src_lang.empty(), ConfigError,
              "--src-lang {}: {} reads the source language from the text (only the target's "
              "tag leads the source); leave --src-lang out",
              src_lang, name);
    out.source = data::tag_ids(src_vocab, {data::language_tag(src_vocab, tgt_lang, tgt_needed_by)},
                               tgt_needed_by);
    return out;
  }
  NMT_CHECK(!src_lang.empty(), ConfigError,
            "{} starts every source with its language's code: give the source language with "
            "--src-lang ({})",
            name, known);
  const std::string src_needed_by = "--src-lang " + src_lang;
  out.source = data::tag_ids(src_vocab, {data::language_tag(src_vocab, src_lang, src_needed_by)},
                             src_needed_by);
  for (int32_t id : data::tag_ids(
           tgt_vocab, {data::language_tag(tgt_vocab, tgt_lang, tgt_needed_by)}, tgt_needed_by))
    out.target.push_back(id);
  return out;
}

}  // namespace nmt::decode
