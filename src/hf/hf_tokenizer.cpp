#include "hf/hf_tokenizer.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <map>
#include <set>

#include "hf/hf_tokenizer_class.h"
#include "hf/hf_tokenizer_files.h"
#include "hf/hf_tokenizer_json.h"
#include "util/error.h"

namespace nmt::hf {
namespace {

using data::HfTokenizerKind;
using data::LanguageCodePlacement;
using data::TokenTable;
using data::Vocab;

using hf_json::AddedToken;
using HfJson = hf_json::Json;

/// The keys read here, named once for the reader and its messages (the files:
/// hf_tokenizer_files.h).
using namespace hf_tokenizer_file;

/// M2M100Tokenizer's language codes (tokenizer_config.json "language_codes"), which it puts
/// right after vocab.json's ids in this order (transformers' FAIRSEQ_LANGUAGE_CODES).
std::vector<std::string_view> m2m100_language_codes(const HfJson& config,
                                                    const std::filesystem::path& file) {
  static constexpr std::string_view kM2M100 =
      "af am ar ast az ba be bg bn br bs ca ceb cs cy da de el en es et fa ff fi fr fy ga gd gl "
      "gu ha he hi hr ht hu hy id ig ilo is it ja jv ka kk km kn ko lb lg ln lo lt lv mg mk ml "
      "mn mr ms my ne nl no ns oc or pa pl ps pt ro ru sd si sk sl so sq sr ss su sv sw ta th tl "
      "tn tr uk ur uz vi wo xh yi yo zh zu";
  static constexpr std::string_view kWmt21 = "en ha is ja cs ru zh de";
  const std::string set = hf_json::optional_string(config, "language_codes", "m2m100", file);
  NMT_CHECK(set == "m2m100" || set == "wmt21", DataError,
            "{}: key \"language_codes\" is \"{}\": expected m2m100 or wmt21", file.string(), set);
  const std::string_view list = set == "m2m100" ? kM2M100 : kWmt21;
  std::vector<std::string_view> codes;
  for (size_t at = 0; at < list.size();) {
    const size_t end = std::min(list.find(' ', at), list.size());
    codes.push_back(list.substr(at, end - at));
    at = end + 1;
  }
  return codes;
}

/// Puts the added tokens at their ids (after the base tokens, or over them), marking the
/// special ones.
void add_tokens(const std::map<int32_t, AddedToken>& added, std::vector<std::string>* tokens,
                std::set<int32_t>* special, const std::filesystem::path& file) {
  for (const auto& [id, token] : added) {
    const auto at = static_cast<size_t>(id);
    if (at >= tokens->size()) {
      NMT_CHECK(at == tokens->size(), DataError,
                "{}: added token \"{}\" has id {}, but the ids end at {}: a gap", file.string(),
                token.content, id, tokens->size());
      tokens->push_back(token.content);
    } else {
      NMT_CHECK((*tokens)[at] == token.content, DataError,
                "{}: added token \"{}\" has id {}, which the vocabulary gives to \"{}\"",
                file.string(), token.content, id, (*tokens)[at]);
    }
    if (token.special) special->insert(id);
  }
}

bool is_language_token(HfTokenizerKind kind, std::string_view token) {
  auto wrapped = [&](std::string_view open, std::string_view close) {
    return token.size() > open.size() + close.size() && token.substr(0, open.size()) == open &&
           token.substr(token.size() - close.size()) == close;
  };
  switch (kind) {
    case HfTokenizerKind::kMarian:
      return wrapped(">>", "<<");
    case HfTokenizerKind::kM2M100:
      return wrapped("__", "__");
    case HfTokenizerKind::kNllb: {
      // xxx_Xxxx: a language code, an underscore, a four-letter script (ISO 15924).
      const size_t cut = token.find('_');
      if (cut == std::string_view::npos || cut < 2 || token.size() != cut + 5) return false;
      auto lower = [](char c) { return c >= 'a' && c <= 'z'; };
      auto upper = [](char c) { return c >= 'A' && c <= 'Z'; };
      return std::all_of(token.begin(), token.begin() + cut, lower) && upper(token[cut + 1]) &&
             std::all_of(token.begin() + cut + 2, token.end(), lower);
    }
  }
  return false;
}

/// The id of a special token named by tokenizer_config.json.
int32_t required_id(const std::vector<std::string>& tokens, const std::string& token,
                    const char* key, const std::filesystem::path& file) {
  const auto found = std::find(tokens.begin(), tokens.end(), token);
  NMT_CHECK(found != tokens.end(), DataError,
            "{}: key \"{}\" names the token \"{}\", which the vocabulary does not hold",
            file.string(), key, token);
  return static_cast<int32_t>(found - tokens.begin());
}

/// The table of one side: `tokens` with the configured special tokens and the language codes
/// marked.
TokenTable make_table(HfTokenizerKind kind, std::vector<std::string> tokens,
                      std::set<int32_t> special, const HfJson& config,
                      const std::filesystem::path& config_file) {
  TokenTable t;
  t.kind = kind;
  t.pad_id = required_id(tokens, hf_json::token_text(config, "pad_token", "<pad>", config_file),
                         "pad_token", config_file);
  t.unk_id = required_id(tokens, hf_json::token_text(config, "unk_token", "<unk>", config_file),
                         "unk_token", config_file);
  t.eos_id = required_id(tokens, hf_json::token_text(config, "eos_token", "</s>", config_file),
                         "eos_token", config_file);
  special.insert({t.pad_id, t.unk_id, t.eos_id});
  // <s> is never text and never generated. NLLB's (required) and M2M100's start nothing:
  // their decoders start with </s>. MarianTokenizer names no bos and OPUS-MT's vocabularies
  // have no <s>, but the vocab.json export-hf writes for a model trained here holds its
  // SentencePiece model's <s>, with which that model starts the decoder (config.json:
  // decoder_start_token_id = bos_token_id). Special, it is the vocabulary's bos again
  // (Vocab::from_hf), which import-hf checks that decoder start against.
  const std::string bos = hf_json::token_text(config, "bos_token", "<s>", config_file);
  if (kind == HfTokenizerKind::kNllb) {
    special.insert(required_id(tokens, bos, "bos_token", config_file));
  } else if (const auto found = std::find(tokens.begin(), tokens.end(), bos);
             found != tokens.end()) {
    special.insert(static_cast<int32_t>(found - tokens.begin()));
  }
  // Marian: pad (config.json decoder_start_token_id); M2M100 and NLLB: eos.
  t.decoder_start_id = kind == HfTokenizerKind::kMarian ? t.pad_id : t.eos_id;
  for (int32_t id = 0; id < static_cast<int32_t>(tokens.size()); ++id)
    if (is_language_token(kind, tokens[static_cast<size_t>(id)]) &&
        (kind == HfTokenizerKind::kMarian || special.count(id))) {
      // Marian's codes are ordinary vocab.json entries that its tokenizer cuts out of the
      // text; here they are inserted by id only, as every tag is.
      t.language_ids.push_back(id);
      special.insert(id);
    }
  t.special_ids.assign(special.begin(), special.end());
  t.unknown_by_text = kind != HfTokenizerKind::kNllb;
  t.placement = kind == HfTokenizerKind::kMarian ? LanguageCodePlacement::kTargetInSource
                                                 : LanguageCodePlacement::kSourceAndTarget;
  t.tokens = std::move(tokens);
  return t;
}

/// NLLB's ids over its model: fairseq's four specials, then every piece but the model's own
/// <unk>, <s>, </s> (ids 0-2) one up.
std::vector<std::string> nllb_tokens(const std::string& spm_bytes,
                                     const std::filesystem::path& file) {
  sentencepiece::SentencePieceProcessor processor;
  const auto status = processor.LoadFromSerializedProto(spm_bytes);
  NMT_CHECK(status.ok(), DataError, "{}: cannot load the SentencePiece model: {}", file.string(),
            status.ToString());
  std::vector<std::string> tokens = {"<s>", "<pad>", "</s>", "<unk>"};
  for (int piece = 3; piece < processor.GetPieceSize(); ++piece)
    tokens.push_back(processor.IdToPiece(piece));
  return tokens;
}

/// A tokenizer directory as every reader starts from it: tokenizer_config.json read, the class
/// chosen, the config's added tokens.
struct TokenizerDir {
  std::filesystem::path dir;
  const HfTokenizerModel& model;
  std::filesystem::path config_file;  ///< tokenizer_config.json
  HfJson config;                      ///< its contents; an empty object when it is absent
  HfTokenizerKind kind = HfTokenizerKind::kMarian;
  std::map<int32_t, AddedToken> config_added;  ///< its added_tokens_decoder
};

TokenizerDir open_tokenizer_dir(const std::filesystem::path& dir, const HfTokenizerModel& model) {
  TokenizerDir t{dir, model, dir / kTokenizerConfig, HfJson::object(), {}, {}};
  // AutoTokenizer reads a directory without tokenizer_config.json with the defaults of the
  // class config.json's model_type names; without a model_type there is nothing to go by.
  const bool config_absent =
      !model.model_type.empty() &&
      !std::filesystem::exists(std::filesystem::symlink_status(t.config_file));
  if (!config_absent) t.config = hf_json::read_json(t.config_file);
  NMT_CHECK(t.config.is_object(), DataError, "{}: expected an object, found {}",
            t.config_file.string(), t.config.type_name());
  t.kind = hf_tokenizer_class(t.config, model, dir, t.config_file);
  t.config_added = hf_json::added_tokens(t.config, t.config_file);
  return t;
}

/// What one side is read from.
struct SideSource {
  std::vector<std::string> tokens;      ///< the base tokens, by id
  std::map<int32_t, AddedToken> added;  ///< tokens added after the base ones, or over them
  std::filesystem::path added_file;     ///< where `added` came from, for messages
  std::filesystem::path spm_file;       ///< the SentencePiece model
  std::string spm_bytes;                ///< its bytes
  int64_t rows = 0;                     ///< the model's rows for this side; 0: the tokenizer's
  const char* what = "source";          ///< the side, for messages
  const char* rows_key = "vocab_size";  ///< config.json's key of `rows`
};

/// One side as a vocabulary, padded to its table's rows (Marian's separate vocabularies differ
/// in size) with placeholder special tokens.
Vocab read_side(const TokenizerDir& t, SideSource side) {
  std::set<int32_t> special;
  add_tokens(side.added, &side.tokens, &special, side.added_file);
  NMT_CHECK(side.rows == 0 || static_cast<int64_t>(side.tokens.size()) <= side.rows, DataError,
            "{}: the tokenizer's {} side has {} ids, more than the model's {} (config.json's {})",
            t.dir.string(), side.what, side.tokens.size(), side.rows, side.rows_key);
  while (static_cast<int64_t>(side.tokens.size()) < side.rows) {
    special.insert(static_cast<int32_t>(side.tokens.size()));
    side.tokens.push_back(fmt::format("<nmt-unused-{}>", side.tokens.size()));
  }
  const TokenTable table =
      make_table(t.kind, std::move(side.tokens), std::move(special), t.config, t.config_file);
  return Vocab::from_hf(table, side.spm_bytes, side.spm_file.string());
}

/// MarianTokenizer: source.spm and target.spm, both sides' ids through vocab.json (the target's
/// through target_vocab.json with separate_vocabs).
data::Vocabularies read_marian(const TokenizerDir& t) {
  const std::filesystem::path& dir = t.dir;
  const bool separate =
      hf_json::optional_boolean(t.config, "separate_vocabs", false, t.config_file);
  const std::vector<std::string> source_tokens = hf_json::tokens_by_id(dir / kVocabJson);
  data::Vocabularies vocab;
  vocab.src = read_side(
      t, {source_tokens, t.config_added, t.config_file, dir / kMarianSource,
          hf_json::read_file(dir / kMarianSource), t.model.src_rows, "source", "vocab_size"});
  vocab.tgt = read_side(
      t, {separate ? hf_json::tokens_by_id(dir / kTargetVocabJson) : source_tokens, t.config_added,
          t.config_file, dir / kMarianTarget, hf_json::read_file(dir / kMarianTarget),
          t.model.tgt_rows, "target", "decoder_vocab_size"});
  return vocab;
}

/// M2M100Tokenizer: one model and vocab.json for both sides, the language codes after its ids.
data::Vocabularies read_m2m100(const TokenizerDir& t) {
  const std::filesystem::path& dir = t.dir;
  std::vector<std::string> tokens = hf_json::tokens_by_id(dir / kVocabJson);
  const std::string spm = hf_json::read_file(dir / kBpeModel);
  // The language codes follow vocab.json's ids (M2M100Tokenizer's lang_token_to_id).
  std::map<int32_t, AddedToken> added = t.config_added;
  const auto first_code = static_cast<int32_t>(tokens.size());
  const std::vector<std::string_view> codes = m2m100_language_codes(t.config, t.config_file);
  for (size_t i = 0; i < codes.size(); ++i)
    added[first_code + static_cast<int32_t>(i)] = {fmt::format("__{}__", codes[i]), true};
  data::Vocabularies vocab;
  vocab.src = read_side(t, {std::move(tokens), std::move(added), t.config_file, dir / kBpeModel,
                            spm, t.model.src_rows, "source", "vocab_size"});
  vocab.tgt = vocab.src;
  return vocab;
}

/// NllbTokenizer: the SentencePiece model with fairseq's ids, the special tokens and language
/// codes from tokenizer.json (not tokenizer_config.json's added tokens).
data::Vocabularies read_nllb(const TokenizerDir& t) {
  const std::filesystem::path& dir = t.dir;
  NMT_CHECK(!hf_json::optional_boolean(t.config, "legacy_behaviour", false, t.config_file),
            DataError,
            "{}: key \"legacy_behaviour\" is true (language code after </s>): not "
            "supported; NLLB's current behaviour (code first) is",
            t.config_file.string());
  // transformers 5 encodes with tokenizer.json (a tokenizers BPE made from this model),
  // which holds the special tokens and language codes; the model itself is what hub
  // directories ship beside it (save_pretrained in transformers 5 no longer writes it).
  NMT_CHECK(std::filesystem::exists(dir / kBpeModel), DataError,
            "{}: missing: NLLB is read from its SentencePiece model; copy it from the "
            "original model directory (the hub's facebook/nllb-200-* have it; transformers 5's "
            "save_pretrained writes only tokenizer.json)",
            (dir / kBpeModel).string());
  // NLLB's language codes and their ids are tokenizer.json's: without it none were read,
  // and the directory imported as a model of no language. transformers builds them from
  // tokenizer_config.json (extra_special_tokens, or its own 202 codes when none are
  // listed) and save_pretrained writes them there; reading that file rather than
  // re-deriving transformers' order is what the docs promise (docs/fine-tune-hf.md).
  NMT_CHECK(std::filesystem::exists(dir / kTokenizerJson), DataError,
            "{}: missing: NLLB's language codes and special tokens are read from it; write it "
            "with transformers: AutoTokenizer.from_pretrained(dir).save_pretrained(dir) (the "
            "hub's facebook/nllb-200-* have it; export-hf does not write it)",
            (dir / kTokenizerJson).string());
  const std::string spm = hf_json::read_file(dir / kBpeModel);
  std::vector<std::string> tokens = nllb_tokens(spm, dir / kBpeModel);
  const HfJson json = hf_json::read_json(dir / kTokenizerJson);
  hf_json::check_tokenizer_json_vocab(json, tokens, dir / kTokenizerJson,
                                      (dir / kBpeModel).string());
  data::Vocabularies vocab;
  vocab.src = read_side(
      t, {std::move(tokens), hf_json::added_tokens_of_json(json, dir / kTokenizerJson),
          dir / kTokenizerJson, dir / kBpeModel, spm, t.model.src_rows, "source", "vocab_size"});
  vocab.tgt = vocab.src;
  return vocab;
}

data::Vocabularies read_vocabularies(const TokenizerDir& t) {
  switch (t.kind) {
    case HfTokenizerKind::kMarian:
      return read_marian(t);
    case HfTokenizerKind::kM2M100:
      return read_m2m100(t);
    case HfTokenizerKind::kNllb:
      return read_nllb(t);
  }
  NMT_THROW(DataError, "{}: unknown Hugging Face tokenizer kind", t.dir.string());
}

}  // namespace

HfTokenizer load_hf_tokenizer(const std::filesystem::path& dir, const HfTokenizerModel& model) {
  const TokenizerDir t = open_tokenizer_dir(dir, model);
  HfTokenizer out;
  out.kind = t.kind;
  out.vocab = read_vocabularies(t);
  out.vocab.joint = out.vocab.src.serialized() == out.vocab.tgt.serialized();
  return out;
}

}  // namespace nmt::hf
