#include "data/token_table.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include <fmt/format.h>

#include "util/error.h"

namespace nmt::data {
namespace {

using Json = nlohmann::ordered_json;

/// The keys of a serialized table, written and read here only.
namespace hf_vocab_key {
constexpr const char* kTokenizer = "tokenizer";
constexpr const char* kTokens = "tokens";
constexpr const char* kSpecial = "special_ids";
constexpr const char* kLanguages = "language_ids";
constexpr const char* kPad = "pad_id";
constexpr const char* kUnk = "unk_id";
constexpr const char* kEos = "eos_id";
constexpr const char* kDecoderStart = "decoder_start_id";
constexpr const char* kUnknownByText = "unknown_by_text";
constexpr const char* kPlacement = "language_placement";
}  // namespace hf_vocab_key

constexpr HfTokenizerKind kKinds[] = {HfTokenizerKind::kMarian, HfTokenizerKind::kM2M100,
                                      HfTokenizerKind::kNllb};

std::string_view placement_name(LanguageCodePlacement placement) {
  return placement == LanguageCodePlacement::kTargetInSource ? "target_in_source"
                                                             : "source_and_target";
}

const Json& field(const Json& json, const char* key, const std::string& name) {
  NMT_CHECK(json.contains(key), DataError, "{}: Hugging Face vocabulary: key \"{}\" is missing",
            name, key);
  return json.at(key);
}

int32_t id_field(const Json& json, const char* key, int64_t size, const std::string& name) {
  const Json& value = field(json, key, name);
  NMT_CHECK(value.is_number_integer() && value.get<int64_t>() >= 0 && value.get<int64_t>() < size,
            DataError, "{}: Hugging Face vocabulary: \"{}\" is {}, expected an id below {}", name,
            key, value.dump(), size);
  return value.get<int32_t>();
}

std::vector<int32_t> ids_field(const Json& json, const char* key, int64_t size,
                               const std::string& name) {
  const Json& value = field(json, key, name);
  NMT_CHECK(value.is_array(), DataError,
            "{}: Hugging Face vocabulary: \"{}\" is {}, expected a list of ids", name, key,
            value.type_name());
  std::vector<int32_t> ids;
  for (const Json& id : value) {
    NMT_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < size,
              DataError, "{}: Hugging Face vocabulary: \"{}\" holds {}, expected ids below {}",
              name, key, id.dump(), size);
    ids.push_back(id.get<int32_t>());
  }
  return ids;
}

}  // namespace

std::string_view hf_tokenizer_name(HfTokenizerKind kind) {
  switch (kind) {
    case HfTokenizerKind::kMarian:
      return "marian";
    case HfTokenizerKind::kM2M100:
      return "m2m100";
    case HfTokenizerKind::kNllb:
      return "nllb";
  }
  return "?";
}

bool is_serialized_hf_vocab(std::string_view bytes) {
  return bytes.size() > kHfVocabMagic.size() &&
         bytes.substr(0, kHfVocabMagic.size()) == kHfVocabMagic &&
         bytes[kHfVocabMagic.size()] == '\n';
}

std::string serialize_hf_vocab(const TokenTable& table, const std::string& spm_bytes) {
  namespace k = hf_vocab_key;
  Json json;
  json[k::kTokenizer] = std::string(hf_tokenizer_name(table.kind));
  json[k::kPad] = table.pad_id;
  json[k::kUnk] = table.unk_id;
  json[k::kEos] = table.eos_id;
  json[k::kDecoderStart] = table.decoder_start_id;
  json[k::kUnknownByText] = table.unknown_by_text;
  json[k::kPlacement] = std::string(placement_name(table.placement));
  json[k::kSpecial] = table.special_ids;
  json[k::kLanguages] = table.language_ids;
  json[k::kTokens] = table.tokens;
  // dump() escapes control characters, so the JSON is one line whatever the tokens hold.
  return std::string(kHfVocabMagic) + "\n" + json.dump() + "\n" + spm_bytes;
}

ParsedHfVocab parse_hf_vocab(std::string_view bytes, const std::string& name) {
  namespace k = hf_vocab_key;
  NMT_CHECK(is_serialized_hf_vocab(bytes), DataError,
            "{}: not a Hugging Face vocabulary (expected the first line \"{}\")", name,
            kHfVocabMagic);
  const size_t begin = kHfVocabMagic.size() + 1;
  const size_t end = bytes.find('\n', begin);
  NMT_CHECK(end != std::string_view::npos, DataError,
            "{}: Hugging Face vocabulary: no line end after its table (truncated?)", name);
  Json json;
  try {
    json = Json::parse(bytes.substr(begin, end - begin));
  } catch (const Json::exception& e) {
    throw DataError(
        fmt::format("{}: Hugging Face vocabulary: its table is not JSON: {}", name, e.what()),
        {__FILE__, __LINE__});
  }
  NMT_CHECK(json.is_object(), DataError,
            "{}: Hugging Face vocabulary: its table is {}, expected an object", name,
            json.type_name());
  ParsedHfVocab out;
  TokenTable& t = out.table;
  const Json& kind = field(json, k::kTokenizer, name);
  const auto known = std::find_if(std::begin(kKinds), std::end(kKinds), [&](HfTokenizerKind c) {
    return kind.is_string() && kind.get<std::string>() == hf_tokenizer_name(c);
  });
  NMT_CHECK(known != std::end(kKinds), DataError,
            "{}: Hugging Face vocabulary: \"{}\" is {}, expected marian, m2m100 or nllb", name,
            k::kTokenizer, kind.dump());
  t.kind = *known;
  const Json& tokens = field(json, k::kTokens, name);
  NMT_CHECK(tokens.is_array() && !tokens.empty(), DataError,
            "{}: Hugging Face vocabulary: \"{}\" must be a non-empty list of strings", name,
            k::kTokens);
  for (const Json& token : tokens) {
    NMT_CHECK(token.is_string(), DataError,
              "{}: Hugging Face vocabulary: \"{}\" holds {}, expected strings", name, k::kTokens,
              token.dump());
    t.tokens.push_back(token.get<std::string>());
  }
  const auto size = static_cast<int64_t>(t.tokens.size());
  t.pad_id = id_field(json, k::kPad, size, name);
  t.unk_id = id_field(json, k::kUnk, size, name);
  t.eos_id = id_field(json, k::kEos, size, name);
  t.decoder_start_id = id_field(json, k::kDecoderStart, size, name);
  t.special_ids = ids_field(json, k::kSpecial, size, name);
  t.language_ids = ids_field(json, k::kLanguages, size, name);
  const Json& by_text = field(json, k::kUnknownByText, name);
  NMT_CHECK(by_text.is_boolean(), DataError,
            "{}: Hugging Face vocabulary: \"{}\" is {}, expected true or false", name,
            k::kUnknownByText, by_text.dump());
  t.unknown_by_text = by_text.get<bool>();
  const Json& placement = field(json, k::kPlacement, name);
  const std::string placement_text = placement.is_string() ? placement.get<std::string>() : "";
  if (placement_text == placement_name(LanguageCodePlacement::kTargetInSource)) {
    t.placement = LanguageCodePlacement::kTargetInSource;
  } else if (placement_text == placement_name(LanguageCodePlacement::kSourceAndTarget)) {
    t.placement = LanguageCodePlacement::kSourceAndTarget;
  } else {
    throw DataError(fmt::format("{}: Hugging Face vocabulary: \"{}\" is {}, expected "
                                "target_in_source or source_and_target",
                                name, k::kPlacement, placement.dump()),
                    {__FILE__, __LINE__});
  }
  out.spm_bytes = std::string(bytes.substr(end + 1));
  return out;
}

}  // namespace nmt::data
