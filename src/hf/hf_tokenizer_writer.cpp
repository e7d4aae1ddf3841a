#include "hf/hf_tokenizer_writer.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <string_view>
#include <unordered_map>
#include <utility>

#include <nlohmann/json.hpp>

#include "hf/hf_tokenizer_files.h"
#include "data/lang_tags.h"
#include "data/spm_model_proto.h"
#include "util/error.h"

namespace nmt::hf {
namespace {

using data::HfTokenizerKind;
using data::ParsedHfVocab;
using data::PieceType;
using data::TokenTable;
using data::Vocab;
using data::is_tag_piece;
using data::parse_hf_vocab;
using data::retype_pieces;

using Json = nlohmann::ordered_json;

using namespace hf_tokenizer_file;

/// The placeholder tokens load_hf_tokenizer adds for model rows beyond the tokenizer's ids.
bool is_placeholder(const std::string& token) { return token.rfind("<nmt-unused-", 0) == 0; }

class FileWriter {
 public:
  explicit FileWriter(std::filesystem::path dir) : dir_(std::move(dir)) {}

  void write(const std::string& name, const std::string& bytes) {
    const std::filesystem::path file = dir_ / name;
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    NMT_CHECK(out.good(), DataError, "{}: cannot write the file", file.string());
    written_.push_back(name);
  }
  void write_json(const std::string& name, const Json& json) { write(name, json.dump(2) + "\n"); }

  std::vector<std::string> take() { return std::move(written_); }

 private:
  std::filesystem::path dir_;
  std::vector<std::string> written_;
};

/// One side as MarianTokenizer and M2M100Tokenizer read it: the SentencePiece model's bytes,
/// the token of each id and the special tokens' texts.
struct Side {
  std::string spm;
  std::vector<std::string> tokens;
  TokenTable table;  ///< an imported vocabulary's (kind, ids); ours: pad/unk/eos only
};

/// The vocab.json token of one of our pieces: a language tag `<2xx>` becomes Marian's `>>xx<<`,
/// which MarianTokenizer takes from the start of the text and looks up whole, so that
/// tokenizer(">>de<< text") gives the ids nmt-translate --tgt-lang de encodes; any other piece
/// is itself.
std::string marian_token(const std::string& piece) {
  if (piece.size() > 3 && piece.rfind("<2", 0) == 0 && piece.back() == '>' && is_tag_piece(piece))
    return ">>" + piece.substr(2, piece.size() - 3) + "<<";
  return piece;
}

/// nmt-train's own model: its pieces are its ids; tags written as control symbols.
Side own_side(const Vocab& vocab) {
  Side side;
  side.spm = retype_pieces(vocab.serialized(), PieceType::kUserDefined, PieceType::kControl,
                           is_tag_piece, vocab.model_path().string())
                 .bytes;
  sentencepiece::SentencePieceProcessor processor;
  const auto status = processor.LoadFromSerializedProto(side.spm);
  NMT_CHECK(status.ok(), DataError, "{}: cannot load the SentencePiece model: {}",
            vocab.model_path().string(), status.ToString());
  for (int id = 0; id < processor.GetPieceSize(); ++id)
    side.tokens.push_back(marian_token(processor.IdToPiece(id)));
  NMT_CHECK(vocab.unk_id() >= 0, DataError,
            "{}: the SentencePiece model has no unknown piece, which MarianTokenizer needs",
            vocab.model_path().string());
  side.table.kind = HfTokenizerKind::kMarian;
  side.table.pad_id = vocab.pad_id();
  side.table.unk_id = vocab.unk_id();
  side.table.eos_id = vocab.eos_id();
  return side;
}

Side imported_side(const Vocab& vocab) {
  ParsedHfVocab parsed = parse_hf_vocab(vocab.serialized(), vocab.model_path().string());
  Side side;
  side.spm = std::move(parsed.spm_bytes);
  side.tokens = parsed.table.tokens;
  while (!side.tokens.empty() && is_placeholder(side.tokens.back())) side.tokens.pop_back();
  side.table = std::move(parsed.table);
  return side;
}

/// {"token": id} for ids [0, end). Linear in tokens: an ordered_json finds a key by a scan of
/// its members, so a lookup (or operator[]) per token was quadratic (minutes for M2M100's 128k);
/// duplicates are found with a hash map and the members built in id order at once.
Json vocab_json(const std::vector<std::string>& tokens, size_t end, const std::string& name) {
  std::unordered_map<std::string_view, size_t> ids;
  ids.reserve(end);
  std::vector<std::pair<std::string, Json>> members;
  members.reserve(end);
  for (size_t id = 0; id < end; ++id) {
    const auto [at, added] = ids.emplace(tokens[id], id);
    NMT_CHECK(added, DataError,
              "{}: the token \"{}\" has two ids ({} and {}), which vocab.json cannot hold", name,
              tokens[id], at->second, id);
    members.emplace_back(tokens[id], id);
  }
  return Json(Json::object_t(std::make_move_iterator(members.begin()),
                             std::make_move_iterator(members.end())));
}

/// tokenizer_config.json's special tokens, named by their texts.
void special_tokens(Json& config, const Side& side) {
  config["eos_token"] = side.tokens.at(static_cast<size_t>(side.table.eos_id));
  config["unk_token"] = side.tokens.at(static_cast<size_t>(side.table.unk_id));
  config["pad_token"] = side.tokens.at(static_cast<size_t>(side.table.pad_id));
}

std::vector<std::string> write_marian(const Side& src, const Side& tgt,
                                      const std::filesystem::path& dir, int64_t max_length) {
  FileWriter files(dir);
  const bool separate = src.tokens != tgt.tokens;
  files.write(kMarianSource, src.spm);
  files.write(kMarianTarget, tgt.spm);
  files.write_json(kVocabJson, vocab_json(src.tokens, src.tokens.size(), "source vocabulary"));
  if (separate)
    files.write_json(kTargetVocabJson,
                     vocab_json(tgt.tokens, tgt.tokens.size(), "target vocabulary"));
  Json config;
  config["tokenizer_class"] = "MarianTokenizer";
  special_tokens(config, tgt);
  config["separate_vocabs"] = separate;
  config["model_max_length"] = max_length;
  files.write_json(kTokenizerConfig, config);
  return files.take();
}

std::vector<std::string> write_m2m100(const Side& side, const std::filesystem::path& dir,
                                      int64_t max_length, const std::string& name) {
  // vocab.json holds the ids before the language codes; M2M100Tokenizer numbers the codes of
  // its language_codes set after them.
  const std::vector<int32_t>& codes = side.table.language_ids;
  NMT_CHECK(codes.size() == 100 || codes.size() == 8, DataError,
            "{}: {} language codes; M2M100Tokenizer knows the sets of 100 (m2m100) and 8 (wmt21)",
            name, codes.size());
  const auto first_code = static_cast<size_t>(*std::min_element(codes.begin(), codes.end()));
  FileWriter files(dir);
  files.write(kBpeModel, side.spm);
  files.write_json(kVocabJson, vocab_json(side.tokens, first_code, name));
  Json config;
  config["tokenizer_class"] = "M2M100Tokenizer";
  config["language_codes"] = codes.size() == 100 ? "m2m100" : "wmt21";
  config["bos_token"] = "<s>";
  special_tokens(config, side);
  config["model_max_length"] = max_length;
  files.write_json(kTokenizerConfig, config);
  return files.take();
}

/// NllbTokenizer's files: the SentencePiece model and tokenizer_config.json naming the special
/// tokens and the language codes in id order, from which transformers 5 builds its tokenizer
/// (a tokenizers BPE with fairseq's ids: the specials, the pieces one up, the added tokens).
std::vector<std::string> write_nllb(const Side& side, const std::filesystem::path& dir,
                                    int64_t max_length) {
  FileWriter files(dir);
  files.write(kBpeModel, side.spm);
  Json config;
  config["tokenizer_class"] = "NllbTokenizer";
  config["bos_token"] = "<s>";
  special_tokens(config, side);
  if (std::find(side.tokens.begin(), side.tokens.end(), "<mask>") != side.tokens.end())
    config["mask_token"] = "<mask>";
  Json codes = Json::array();
  std::vector<int32_t> ids = side.table.language_ids;
  std::sort(ids.begin(), ids.end());
  for (int32_t id : ids) codes.push_back(side.tokens.at(static_cast<size_t>(id)));
  config["extra_special_tokens"] = codes;
  config["legacy_behaviour"] = false;
  config["model_max_length"] = max_length;
  files.write_json(kTokenizerConfig, config);
  return files.take();
}

}  // namespace

std::vector<std::string> write_hf_tokenizer(const data::Vocabularies& vocab,
                                            const std::filesystem::path& dir,
                                            int64_t max_length) {
  const TokenTable* table = vocab.src.hf_table();
  NMT_CHECK((table == nullptr) == (vocab.tgt.hf_table() == nullptr), DataError,
            "{} and {}: one vocabulary imported from Hugging Face and one not",
            vocab.src.model_path().string(), vocab.tgt.model_path().string());
  if (table == nullptr)
    return write_marian(own_side(vocab.src), own_side(vocab.tgt), dir, max_length);
  const std::string name = vocab.src.model_path().string();
  switch (table->kind) {
    case HfTokenizerKind::kMarian:
      return write_marian(imported_side(vocab.src), imported_side(vocab.tgt), dir, max_length);
    case HfTokenizerKind::kM2M100:
      return write_m2m100(imported_side(vocab.src), dir, max_length, name);
    case HfTokenizerKind::kNllb:
      return write_nllb(imported_side(vocab.src), dir, max_length);
  }
  NMT_THROW(DataError, "{}: unknown Hugging Face tokenizer kind", name);
}

}  // namespace nmt::hf
