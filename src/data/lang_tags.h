#pragma once
// Source tags: the tokens put first in a source sentence to tell the model something about
// the pair. Two kinds exist: the back-translation tag `<BT>` of a data.train entry with
// `tag: bt` (tagged back-translation, Caswell et al. 2019), and, with data.lang_tags: target,
// the target language's tag `<2xx>` of a multilingual model (Johnson et al. 2017). A source
// reads `<2xx> <BT> text...`: the language tag first, so the decoder's one instruction about
// what to produce always sits at position 0.
//
// Tags are SentencePiece user-defined symbols: one piece each, never split, and never
// learned into other pieces by the vocabulary trainer. They are added to the encoded ids
// (token cache, translator), not to the text, since SentencePiece would put its word-start
// piece before a tag that begins the text.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/data_options.h"

namespace nmt::data {

class Vocab;

/// The source tag of back-translated corpora.
inline constexpr std::string_view kBackTranslationTag = "<BT>";

/// The user-defined symbols the vocabulary of these data options must hold, in the order
/// they are given to SentencePiece; empty when no corpus is tagged (the vocabulary is then
/// the one trained before tags existed).
std::vector<std::string> required_tags(const DataOptions& options);

/// The tags put first in the source sentences of `corpus`, in order.
std::vector<std::string> source_tags(const DataOptions& options, const CorpusOptions& corpus);

/// The ids of `tags` in `vocab`. Throws DataError naming the vocabulary's model, the missing
/// tag and `needed_by` (e.g. "data.train entry bt: tag bt") when the model lacks one.
std::vector<int32_t> tag_ids(const Vocab& vocab, const std::vector<std::string>& tags,
                             const std::string& needed_by);

}  // namespace nmt::data
