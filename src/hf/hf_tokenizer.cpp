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

}  // namespace

HfTokenizer load_hf_tokenizer(const std::filesystem::path& dir, const HfTokenizerModel& model) {
  const std::filesystem::path config_file = dir / kTokenizerConfig;
  // AutoTokenizer reads a directory without tokenizer_config.json with the defaults of the
  // class config.json's model_type names; without a model_type there is nothing to go by.
  const bool config_absent = !model.model_type.empty() &&
                             !std::filesystem::exists(std::filesystem::symlink_status(config_file));
  const HfJson config = config_absent ? HfJson::object() : hf_json::read_json(config_file);
  NMT_CHECK(config.is_object(), DataError, "{}: expected an object, found {}", config_file.string(),
            config.type_name());
  HfTokenizer out;
  out.kind = hf_tokenizer_class(config, model, dir, config_file);
  std::map<int32_t, AddedToken> added = hf_json::added_tokens(config, config_file);
  std::filesystem::path added_file = config_file;
  // Each side padded to its own table's rows (Marian's separate vocabularies differ in size).
  auto side = [&](std::vector<std::string> tokens, const std::filesystem::path& spm_file,
                  const std::string& spm_bytes, int64_t rows, const char* what,
                  const char* rows_key) {
    std::set<int32_t> special;
    add_tokens(added, &tokens, &special, added_file);
    NMT_CHECK(rows == 0 || static_cast<int64_t>(tokens.size()) <= rows, DataError,
              "{}: the tokenizer's {} side has {} ids, more than the model's {} (config.json's {})",
              dir.string(), what, tokens.size(), rows, rows_key);
    while (static_cast<int64_t>(tokens.size()) < rows) {
      special.insert(static_cast<int32_t>(tokens.size()));
      tokens.push_back(fmt::format("<nmt-unused-{}>", tokens.size()));
    }
    const TokenTable table =
        make_table(out.kind, std::move(tokens), std::move(special), config, config_file);
    return Vocab::from_hf(table, spm_bytes, spm_file.string());
  };
  switch (out.kind) {
    case HfTokenizerKind::kMarian: {
      const bool separate =
          hf_json::optional_boolean(config, "separate_vocabs", false, config_file);
      const std::vector<std::string> source_tokens = hf_json::tokens_by_id(dir / kVocabJson);
      out.vocab.src =
          side(source_tokens, dir / kMarianSource, hf_json::read_file(dir / kMarianSource),
               model.src_rows, "source", "vocab_size");
      out.vocab.tgt = side(separate ? hf_json::tokens_by_id(dir / kTargetVocabJson) : source_tokens,
                           dir / kMarianTarget, hf_json::read_file(dir / kMarianTarget),
                           model.tgt_rows, "target", "decoder_vocab_size");
      break;
    }
    case HfTokenizerKind::kM2M100: {
      std::vector<std::string> tokens = hf_json::tokens_by_id(dir / kVocabJson);
      const std::string spm = hf_json::read_file(dir / kBpeModel);
      // The language codes follow vocab.json's ids (M2M100Tokenizer's lang_token_to_id).
      const auto first_code = static_cast<int32_t>(tokens.size());
      const std::vector<std::string_view> codes = m2m100_language_codes(config, config_file);
      for (size_t i = 0; i < codes.size(); ++i)
        added[first_code + static_cast<int32_t>(i)] = {fmt::format("__{}__", codes[i]), true};
      out.vocab.src =
          side(std::move(tokens), dir / kBpeModel, spm, model.src_rows, "source", "vocab_size");
      out.vocab.tgt = out.vocab.src;
      break;
    }
    case HfTokenizerKind::kNllb: {
      NMT_CHECK(!hf_json::optional_boolean(config, "legacy_behaviour", false, config_file),
                DataError,
                "{}: key \"legacy_behaviour\" is true (language code after </s>): not "
                "supported; NLLB's current behaviour (code first) is",
                config_file.string());
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
      added = hf_json::added_tokens_of_json(json, dir / kTokenizerJson);
      added_file = dir / kTokenizerJson;
      out.vocab.src =
          side(std::move(tokens), dir / kBpeModel, spm, model.src_rows, "source", "vocab_size");
      out.vocab.tgt = out.vocab.src;
      break;
    }
  }
  out.vocab.joint = out.vocab.src.serialized() == out.vocab.tgt.serialized();
  return out;
}

}  // namespace nmt::hf
