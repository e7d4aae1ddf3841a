#pragma once
// The language codes that lead a multilingual model's sources and outputs, from --src-lang
// and --tgt-lang and what the checkpoint says of its languages (data/lang_tags.h).

#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/run_metadata.h"
#include "data/vocab.h"
#include "decode/translate_options.h"

namespace nmt::decode {

/// The language codes of a multilingual model: first in every source, and forced first in
/// every output where the vocabulary puts the target's there (data/lang_tags.h).
struct LanguagePrefixes {
  std::vector<int32_t> source;  ///< --tgt-lang's tag (ours, Marian's), or --src-lang's code
  std::vector<int64_t> target;  ///< --tgt-lang's code (M2M100, NLLB); empty otherwise
};

/// The prefixes of --src-lang and --tgt-lang. A model of nmt-train (metadata lang_tags:
/// target) takes --tgt-lang among the languages it was trained on; an imported one, any
/// language its vocabulary has a code for (by either ISO 639 code). Throws ConfigError when a
/// language is missing, given for a model that takes none, or unknown.
LanguagePrefixes language_prefixes(const checkpoint::RunMetadata& meta,
                                   const TranslateOptions& options, const data::Vocab& src_vocab,
                                   const data::Vocab& tgt_vocab, const std::string& name);

}  // namespace nmt::decode
