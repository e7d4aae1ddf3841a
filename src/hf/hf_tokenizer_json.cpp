#include "hf/hf_tokenizer_json.h"

#include <fstream>
#include <iterator>

#include "util/error.h"
#include "util/file_kind.h"

namespace nmt::hf::hf_json {
namespace {

constexpr const char* kAddedTokensKey = "added_tokens_decoder";  ///< tokenizer_config.json's
constexpr const char* kAddedTokensListKey = "added_tokens";      ///< tokenizer.json's
constexpr int64_t kIdEnd = int64_t{1} << 31;  ///< ids are int32 (token tables, tensors)

/// Whether a JSON value is an id: an integer in [0, 2^31) (a larger one would wrap in int32).
bool is_id(const Json& value) {
  return (value.is_number_unsigned() && value.get<uint64_t>() < static_cast<uint64_t>(kIdEnd)) ||
         (value.is_number_integer() && value.get<int64_t>() >= 0 && value.get<int64_t>() < kIdEnd);
}

/// An added token's "special": true when absent (transformers' default), else a boolean.
bool special_flag(const Json& token, const std::string& key_path,
                  const std::filesystem::path& file) {
  if (!token.contains("special")) return true;
  const Json& value = token.at("special");
  NMT_CHECK(value.is_boolean(), DataError, "{}: key \"{}.special\" is {}, expected true or false",
            file.string(), key_path, value.dump());
  return value.get<bool>();
}

}  // namespace

std::string read_file(const std::filesystem::path& file) {
  // Checked before opening: an ifstream on a FIFO waits for a writer.
  const std::string kind = not_regular_file(file);
  NMT_CHECK(kind.empty(), DataError, "{}: not a regular file ({}): refused rather than read",
            file.string(), kind);
  std::ifstream in(file, std::ios::binary);
  NMT_CHECK(in.good(), DataError, "{}: cannot read the file (a Hugging Face tokenizer needs it)",
            file.string());
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

Json read_json(const std::filesystem::path& file) {
  const std::string text = read_file(file);
  try {
    return Json::parse(text);
  } catch (const Json::exception& e) {
    NMT_THROW(DataError, "{}: not JSON: {}", file.string(), e.what());
  }
}

bool optional_boolean(const Json& config, const char* key, bool fallback,
                      const std::filesystem::path& file) {
  if (!config.contains(key) || config.at(key).is_null()) return fallback;
  const Json& value = config.at(key);
  NMT_CHECK(value.is_boolean(), DataError, "{}: key \"{}\" is {}, expected true or false",
            file.string(), key, value.dump());
  return value.get<bool>();
}

std::string optional_string(const Json& config, const char* key, const std::string& fallback,
                            const std::filesystem::path& file) {
  if (!config.contains(key) || config.at(key).is_null()) return fallback;
  const Json& value = config.at(key);
  NMT_CHECK(value.is_string(), DataError, "{}: key \"{}\" is {}, expected a string", file.string(),
            key, value.dump());
  return value.get<std::string>();
}

std::string token_text(const Json& config, const char* key, const std::string& fallback,
                       const std::filesystem::path& file) {
  if (!config.contains(key) || config.at(key).is_null()) return fallback;
  const Json& value = config.at(key);
  if (value.is_string()) return value.get<std::string>();
  NMT_CHECK(value.is_object() && value.contains("content") && value.at("content").is_string(),
            DataError, "{}: key \"{}\" is {}, expected a token string or {{\"content\": ...}}",
            file.string(), key, value.dump());
  return value.at("content").get<std::string>();
}

std::map<int32_t, AddedToken> added_tokens(const Json& config, const std::filesystem::path& file) {
  std::map<int32_t, AddedToken> out;
  if (!config.contains(kAddedTokensKey)) return out;
  const Json& tokens = config.at(kAddedTokensKey);
  NMT_CHECK(tokens.is_object(), DataError, "{}: key \"{}\" is {}, expected an object",
            file.string(), kAddedTokensKey, tokens.type_name());
  for (const auto& [key, value] : tokens.items()) {
    int64_t id = -1;
    try {
      size_t used = 0;
      id = std::stoll(key, &used);
      if (used != key.size()) id = -1;
    } catch (const std::exception&) {
    }
    NMT_CHECK(id >= 0 && id < kIdEnd && value.is_object() && value.contains("content") &&
                  value.at("content").is_string(),
              DataError, "{}: key \"{}.{}\": expected an id with {{\"content\": ...}}, found {}",
              file.string(), kAddedTokensKey, key, value.dump());
    out[static_cast<int32_t>(id)] = {value.at("content").get<std::string>(),
                                     special_flag(value, kAddedTokensKey + ("." + key), file)};
  }
  return out;
}

std::map<int32_t, AddedToken> added_tokens_of_json(const Json& json,
                                                   const std::filesystem::path& file) {
  std::map<int32_t, AddedToken> out;
  NMT_CHECK(json.contains(kAddedTokensListKey) && json.at(kAddedTokensListKey).is_array(),
            DataError, "{}: key \"{}\" is missing or not a list", file.string(),
            kAddedTokensListKey);
  const Json& tokens = json.at(kAddedTokensListKey);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const Json& token = tokens[i];
    const std::string key_path = fmt::format("{}.{}", kAddedTokensListKey, i);
    NMT_CHECK(token.is_object() && token.contains("content") && token.at("content").is_string(),
              DataError, "{}: key \"{}\" is {}, expected {{\"id\": ..., \"content\": ...}}",
              file.string(), key_path, token.dump());
    NMT_CHECK(token.contains("id") && is_id(token.at("id")), DataError,
              "{}: key \"{}.id\" is {}, expected an id from 0 to {}", file.string(), key_path,
              token.contains("id") ? token.at("id").dump() : "missing", kIdEnd - 1);
    out[static_cast<int32_t>(token.at("id").get<int64_t>())] = {
        token.at("content").get<std::string>(), special_flag(token, key_path, file)};
  }
  return out;
}

void check_tokenizer_json_vocab(const Json& json, const std::vector<std::string>& tokens,
                                const std::filesystem::path& file, const std::string& model) {
  if (!json.contains("model") || !json.at("model").contains("vocab")) return;
  const Json& vocab = json.at("model").at("vocab");
  if (!vocab.is_object()) return;
  for (const auto& [token, id] : vocab.items()) {
    const bool in_range = id.is_number_integer() && id.get<int64_t>() >= 0 &&
                          id.get<int64_t>() < static_cast<int64_t>(tokens.size());
    NMT_CHECK(in_range && tokens[id.get<size_t>()] == token, DataError,
              "{}: key \"model.vocab\" gives \"{}\" the id {}, but {} gives that id to \"{}\" "
              "(fairseq's ids: the model's pieces one up): the two files are of different "
              "tokenizers",
              file.string(), token, id.dump(), model,
              in_range ? tokens[id.get<size_t>()] : std::string("nothing"));
  }
}

std::vector<std::string> tokens_by_id(const std::filesystem::path& file) {
  const Json vocab = read_json(file);
  NMT_CHECK(vocab.is_object() && !vocab.empty(), DataError,
            "{}: expected an object of token: id, found {}", file.string(), vocab.type_name());
  std::vector<std::string> tokens(vocab.size());
  std::vector<bool> seen(vocab.size(), false);
  for (const auto& [token, id] : vocab.items()) {
    NMT_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 &&
                  id.get<int64_t>() < static_cast<int64_t>(tokens.size()) &&
                  !seen[id.get<size_t>()],
              DataError, "{}: token \"{}\" has id {}; expected each id 0..{} once", file.string(),
              token, id.dump(), tokens.size() - 1);
    seen[id.get<size_t>()] = true;
    tokens[id.get<size_t>()] = token;
  }
  return tokens;
}

}  // namespace nmt::hf::hf_json
