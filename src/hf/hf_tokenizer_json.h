#pragma once
// The JSON files of a Hugging Face tokenizer directory as hf/hf_tokenizer.cpp reads them:
// every value checked for its type before use, so that a wrong one is a DataError naming the
// file and the key path ("added_tokens.3.special"), never a bare JSON library exception.

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace nmt::hf::hf_json {

/// Unordered: vocab.json is looked up by piece (ordered_json finds keys by a linear search).
using Json = nlohmann::json;

/// A file's bytes. Throws DataError naming it when it cannot be read.
std::string read_file(const std::filesystem::path& file);

/// A file parsed as JSON. Throws DataError naming it when it cannot be read or parsed.
Json read_json(const std::filesystem::path& file);

/// config[key] as true or false; `fallback` when absent or null (transformers reads None as
/// its default). Throws DataError naming `file` and `key` for another type.
bool optional_boolean(const Json& config, const char* key, bool fallback,
                      const std::filesystem::path& file);

/// config[key] as a string; `fallback` when absent or null. Throws DataError naming `file`
/// and `key` for another type.
std::string optional_string(const Json& config, const char* key, const std::string& fallback,
                            const std::filesystem::path& file);

/// A special token's text: tokenizer_config.json writes either a string or an AddedToken
/// ({"content": ...}); `fallback` when the key is absent or null.
std::string token_text(const Json& config, const char* key, const std::string& fallback,
                       const std::filesystem::path& file);

/// An added token: its text and whether it is special (never from text, dropped in decode).
struct AddedToken {
  std::string content;
  bool special = true;
};

/// tokenizer_config.json's added_tokens_decoder ({"id": {"content": ..., "special": ...}}),
/// by id; empty when the key is absent.
std::map<int32_t, AddedToken> added_tokens(const Json& config, const std::filesystem::path& file);

/// tokenizer.json's added_tokens ([{"id": ..., "content": ..., "special": ...}]): where
/// transformers 5 keeps the special tokens and language codes of a tokenizers-backed class.
std::map<int32_t, AddedToken> added_tokens_of_json(const Json& json,
                                                   const std::filesystem::path& file);

/// Checks that tokenizer.json's model.vocab (what AutoTokenizer encodes with) gives every
/// token the id of `tokens` (`model` names where those come from).
void check_tokenizer_json_vocab(const Json& json, const std::vector<std::string>& tokens,
                                const std::filesystem::path& file, const std::string& model);

/// vocab.json ({"token": id}) as the token of each id; ids must run 0..n-1 without gaps.
std::vector<std::string> tokens_by_id(const std::filesystem::path& file);

}  // namespace nmt::hf::hf_json
