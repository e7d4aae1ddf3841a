// Test-only probe for tests/scripts/test_hf_tokenizer.py: loads a Hugging Face tokenizer
// directory through hf/hf_tokenizer.h and answers one JSON line per request line on stdin,
// building ids exactly as the training data pipeline does (the corpus's tags by id, the text's
// pieces, then eos), so that the script can compare them with the Python tokenizer's.
//
//   hf_tokenizer_probe DIR < requests.jsonl > answers.jsonl
//   {"encode": "text", "side": "source"|"target", "src_lang": "de", "tgt_lang": "en"}
//       -> {"ids": [...]}          (languages optional: without them, no tags)
//   {"decode": [ids]}              -> {"text": "..."}     (the target side's decode)
// The first answer line describes the vocabulary: {"kind", "size", "pad", "unk", "eos",
// "bos", "joint"}. Errors go to stderr with exit status 1.

#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "data/data_options.h"
#include "hf/hf_tokenizer.h"
#include "data/lang_tags.h"

namespace {

using Json = nlohmann::ordered_json;

std::vector<int32_t> encode(const nmt::hf::HfTokenizer& tokenizer, const Json& request) {
  const bool source = request.value("side", "source") == "source";
  const nmt::data::Vocab& vocab = source ? tokenizer.vocab.src : tokenizer.vocab.tgt;
  nmt::data::DataOptions options;
  nmt::data::CorpusOptions corpus;
  corpus.name = "probe";
  corpus.src_lang = request.value("src_lang", "");
  corpus.tgt_lang = request.value("tgt_lang", "");
  if (!corpus.tgt_lang.empty()) options.lang_tags = nmt::data::LangTags::kTarget;
  const std::vector<std::string> tags = source ? nmt::data::source_tags(options, corpus, vocab)
                                               : nmt::data::target_tags(options, corpus, vocab);
  std::vector<int32_t> ids = nmt::data::tag_ids(vocab, tags, "the probe");
  const std::vector<int32_t> pieces = vocab.encode(request.at("encode").get<std::string>());
  ids.insert(ids.end(), pieces.begin(), pieces.end());
  ids.push_back(vocab.eos_id());
  return ids;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: hf_tokenizer_probe DIR < requests.jsonl\n";
    return 2;
  }
  try {
    const nmt::hf::HfTokenizer tokenizer = nmt::hf::load_hf_tokenizer(argv[1]);
    const nmt::data::Vocab& tgt = tokenizer.vocab.tgt;
    std::cout << Json{{"kind", std::string(nmt::data::hf_tokenizer_name(tokenizer.kind))},
                      {"size", tokenizer.vocab.src.size()},
                      {"pad", tgt.pad_id()},
                      {"unk", tgt.unk_id()},
                      {"eos", tgt.eos_id()},
                      {"bos", tgt.bos_id()},
                      {"joint", tokenizer.vocab.joint}}
                     .dump()
              << '\n';
    std::string line;
    while (std::getline(std::cin, line)) {
      const Json request = Json::parse(line);
      if (request.contains("decode")) {
        std::cout
            << Json{{"text", tgt.decode(request.at("decode").get<std::vector<int32_t>>())}}.dump()
            << '\n';
      } else {
        std::cout << Json{{"ids", encode(tokenizer, request)}}.dump() << '\n';
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "hf_tokenizer_probe: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
