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
#include "data/language_codes.h"

namespace nmt::data {

class Vocab;

/// The source tag of back-translated corpora.
inline constexpr std::string_view kBackTranslationTag = "<BT>";

/// The tag of a target language: "<2de>" for "de".
std::string language_tag(std::string_view code);

/// The languages the training corpora name (src_lang and tgt_lang of data.train), sorted and
/// unique: what a checkpoint records and a resume must match. Empty when none are named.
std::vector<std::string> run_languages(const DataOptions& options);

/// "en-de" for a corpus with src_lang en and tgt_lang de; empty when it names no languages.
std::string pair_label(const CorpusOptions& corpus);

/// The user-defined symbols the vocabulary of these data options must hold, in the order
/// they are given to SentencePiece: with data.lang_tags: target the tag of every language of
/// run_languages() (so any direction between them can be asked for), then `<BT>` when a
/// corpus has tag: bt. Empty when nothing is tagged (the vocabulary is then the one trained
/// before tags existed).
std::vector<std::string> required_tags(const DataOptions& options);

/// The tags put first in the source sentences of `corpus`, in order: its target language's
/// with data.lang_tags: target, then `<BT>` for a back-translated corpus.
std::vector<std::string> source_tags(const DataOptions& options, const CorpusOptions& corpus);

/// The ids of `tags` in `vocab`. Throws DataError naming the vocabulary's model, the missing
/// tag and `needed_by` (e.g. "data.train entry bt: tag bt") when the model lacks one.
std::vector<int32_t> tag_ids(const Vocab& vocab, const std::vector<std::string>& tags,
                             const std::string& needed_by);

}  // namespace nmt::data
