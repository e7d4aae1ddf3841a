#pragma once
// Source tags: the tokens put first in a source sentence to tell the model something about
// the pair. Two kinds exist: the back-translation tag `<BT>` of a data.train entry with
// `tag: bt` (tagged back-translation, Caswell et al. 2019), and, with data.lang_tags: target,
// the target language's tag `<2xx>` of a multilingual model (Johnson et al. 2017). A source
// reads `<2xx> <BT> text...`: the language tag first, so the decoder's one instruction about
// what to produce always sits at position 0.
//
// Tags are SentencePiece control symbols: one piece each, never learned into other pieces by
// the vocabulary trainer, and never produced from text. They are inserted by id into the
// encoded sources (token cache, translator), so a corpus line or an input line that contains
// the text `<BT>` or `<2de>` is encoded as those characters: an untagged corpus cannot carry
// the back-translation signal, nor can input text switch a multilingual model's target.
// A vocabulary may declare the tags as user-defined symbols (nmt-train's first ones do), which
// SentencePiece matches inside text; Vocab (vocab.h) loads those with their tags as control
// symbols, which keeps every id and the encoding of any text without the tag strings.

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

/// True for the text of a tag nmt-train inserts: `<BT>`, or `<2xx>` for a language code xx.
bool is_tag_piece(std::string_view piece);

/// The languages the training corpora name (src_lang and tgt_lang of data.train), sorted and
/// unique: what a checkpoint records and a resume must match. Empty when none are named.
std::vector<std::string> run_languages(const DataOptions& options);

/// "en-de" for a corpus with src_lang en and tgt_lang de; empty when it names no languages.
std::string pair_label(const CorpusOptions& corpus);

/// The user-defined symbols the vocabulary of these data options must hold, in the order
/// they are given to SentencePiece: with data.lang_tags: target the tag of every language of
/// run_languages() (so any direction between them can be asked for), then `<BT>` when a
/// corpus has tag: bt. Empty when nothing is tagged (the vocabulary then holds no tag).
std::vector<std::string> required_tags(const DataOptions& options);

/// The tags put first in the source sentences of `corpus`, in order: its target language's
/// with data.lang_tags: target, then `<BT>` for a back-translated corpus.
std::vector<std::string> source_tags(const DataOptions& options, const CorpusOptions& corpus);

/// The tag of language `code` in `vocab`: language_tag(code) for nmt-train's own
/// vocabularies; for one imported from Hugging Face (hf/hf_tokenizer.h) its language-code
/// token (`__de__`, `deu_Latn`, `>>deu<<`), found from either ISO 639 code ("de" or "deu").
/// Throws DataError naming the vocabulary, the code and `needed_by` when it has none, or more
/// than one (e.g. two scripts), listing them.
std::string language_tag(const Vocab& vocab, std::string_view code, const std::string& needed_by);

/// The languages an imported vocabulary has codes for, as its codes spell them ("de" of
/// `__de__`, "deu" of `>>deu<<`, "deu_Latn"), in id order; empty for nmt-train's own
/// vocabularies (their tags follow the run's languages).
std::vector<std::string> vocabulary_languages(const Vocab& vocab);

/// source_tags with the language codes where `vocab` puts them: the target language's (ours,
/// Marian's), or the source language's (M2M100, NLLB; the target's then starts the target).
std::vector<std::string> source_tags(const DataOptions& options, const CorpusOptions& corpus,
                                     const Vocab& vocab);

/// The tags put first in the target sentences of `corpus`: with data.lang_tags: target and a
/// vocabulary that places codes in both (M2M100, NLLB), its target language's; else none. The
/// decoder is trained to produce them first, so search must force them (and decode drops them).
std::vector<std::string> target_tags(const DataOptions& options, const CorpusOptions& corpus,
                                     const Vocab& vocab);

/// The ids of `tags` in `vocab`. Throws DataError naming the vocabulary's model, the tag and
/// `needed_by` (e.g. "data.train entry bt") when the model lacks one, or has it as a piece
/// that text can produce (neither a control symbol nor a user-defined one, which Vocab loads
/// as control).
std::vector<int32_t> tag_ids(const Vocab& vocab, const std::vector<std::string>& tags,
                             const std::string& needed_by);

}  // namespace nmt::data
