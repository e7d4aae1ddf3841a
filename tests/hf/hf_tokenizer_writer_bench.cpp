// Benchmark (not a test) of export-hf's tokenizer files for a vocabulary of M2M100's size
// (#44: vocab.json was built with a lookup per token in an ordered_json, quadratic in tokens):
// makes an M2M100Tokenizer directory whose vocab.json has TOKENS entries (a small SentencePiece
// model's pieces, then made-up tokens), reads it as import-hf does, and times
// hf::write_hf_tokenizer (vocab.json, the model, tokenizer_config.json) over REPEATS runs.
//
//   cmake --build build --target hf_tokenizer_writer_bench
//   build/tests/hf_tokenizer_writer_bench [TOKENS=128004] [REPEATS=3]
//
// Prints one JSON line: tokens, load_s (load_hf_tokenizer, once) and write_s (each run).

#include <sentencepiece_processor.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "hf/hf_tokenizer.h"
#include "hf/hf_tokenizer_writer.h"
#include "spm_fixture.h"

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void write(const fs::path& file, const std::string& text) {
  std::ofstream(file, std::ios::binary) << text;
}

/// An M2M100Tokenizer directory with `tokens` vocab.json entries.
void make_m2m100_dir(const fs::path& dir, size_t tokens) {
  const auto model = nmt::test::train_spm(NMT_SOURCE_DIR "/data/ddtp.en-de.test.en",
                                          dir / "sentencepiece.bpe", 300, " --model_type=bpe");
  sentencepiece::SentencePieceProcessor sp;
  if (!sp.Load(model.string()).ok()) throw std::runtime_error("loading " + model.string());
  std::vector<std::string> names = {"<s>", "<pad>", "</s>", "<unk>"};
  for (int i = 0; i < sp.GetPieceSize(); ++i)
    if (!sp.IsUnknown(i) && !sp.IsControl(i)) names.push_back(sp.IdToPiece(i));
  for (size_t i = 0; names.size() < tokens; ++i)
    names.push_back("\xE2\x96\x81tok" + std::to_string(i));
  // Written as text: building it as an ordered_json would be the quadratic lookup measured.
  std::string vocab = "{";
  for (size_t id = 0; id < names.size(); ++id)
    vocab += (id ? "," : "") + Json(names[id]).dump() + ":" + std::to_string(id);
  write(dir / "vocab.json", vocab + "}");
  write(dir / "tokenizer_config.json",
        Json{{"tokenizer_class", "M2M100Tokenizer"}, {"language_codes", "m2m100"}}.dump());
}

}  // namespace

int main(int argc, char** argv) {
  const size_t tokens = argc > 1 ? std::stoul(argv[1]) : 128004;  // M2M100's vocab.json
  const int repeats = argc > 2 ? std::stoi(argv[2]) : 3;
  const fs::path dir =
      fs::temp_directory_path() / ("hf-writer-bench-" + std::to_string(std::random_device{}()));
  fs::create_directories(dir / "in");
  try {
    make_m2m100_dir(dir / "in", tokens);
    auto start = std::chrono::steady_clock::now();
    const nmt::hf::HfTokenizer tokenizer = nmt::hf::load_hf_tokenizer(dir / "in");
    const double load_s = seconds_since(start);
    Json write_s = Json::array();
    for (int i = 0; i < repeats; ++i) {
      const fs::path out = dir / ("out" + std::to_string(i));
      fs::create_directories(out);
      start = std::chrono::steady_clock::now();
      nmt::hf::write_hf_tokenizer(tokenizer.vocab, out, 1024);
      write_s.push_back(seconds_since(start));
    }
    std::cout << Json{{"tokens", tokens}, {"load_s", load_s}, {"write_s", write_s}}.dump()
              << std::endl;
  } catch (const std::exception& e) {
    std::cerr << "hf_tokenizer_writer_bench: " << e.what() << "\n";
    fs::remove_all(dir);
    return 1;
  }
  fs::remove_all(dir);
  return 0;
}
