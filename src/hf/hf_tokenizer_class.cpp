#include "hf/hf_tokenizer_class.h"

#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "hf/hf_tokenizer_files.h"
#include "util/error.h"

namespace nmt::hf {
namespace {

using data::HfTokenizerKind;

using namespace hf_tokenizer_file;
constexpr const char* kClassKey = "tokenizer_class";
constexpr const char* kKnown = "MarianTokenizer, M2M100Tokenizer or NllbTokenizer";

/// A class name we read ("...Fast" as the class itself, as AutoTokenizer strips it).
std::optional<HfTokenizerKind> kind_of_name(const std::string& name) {
  if (name == "MarianTokenizer") return HfTokenizerKind::kMarian;
  if (name == "M2M100Tokenizer") return HfTokenizerKind::kM2M100;
  if (name == "NllbTokenizer" || name == "NllbTokenizerFast") return HfTokenizerKind::kNllb;
  return std::nullopt;
}

/// The files the class reads whichever way the directory was written.
std::vector<const char*> files_read(HfTokenizerKind kind, bool separate_vocabs) {
  switch (kind) {
    case HfTokenizerKind::kMarian:
      if (separate_vocabs) return {kMarianSource, kMarianTarget, kVocabJson, kTargetVocabJson};
      return {kMarianSource, kMarianTarget, kVocabJson};
    case HfTokenizerKind::kM2M100:
      return {kVocabJson, kBpeModel};
    case HfTokenizerKind::kNllb:
      return {kBpeModel, kTokenizerJson};
  }
  return {};
}

}  // namespace

HfTokenizerKind hf_tokenizer_class(const nlohmann::json& config, const HfTokenizerModel& model,
                                   const std::filesystem::path& dir,
                                   const std::filesystem::path& config_file) {
  if (config.contains(kClassKey) && !config.at(kClassKey).is_null()) {
    const nlohmann::json& value = config.at(kClassKey);
    NMT_CHECK(value.is_string(), DataError, "{}: key \"{}\" is {}, expected a class name",
              config_file.string(), kClassKey, value.dump());
    const std::string name = value.get<std::string>();
    const auto kind = kind_of_name(name);
    NMT_CHECK(kind.has_value(), DataError,
              "{}: key \"{}\" is \"{}\": {} holds no tokenizer nmt-train reads ({})",
              config_file.string(), kClassKey, name, dir.string(), kKnown);
    return *kind;
  }
  const std::string model_file = (dir / "config.json").string();
  if (!model.tokenizer_class.empty()) {
    const auto kind = kind_of_name(model.tokenizer_class);
    NMT_CHECK(kind.has_value(), DataError,
              "{}: key \"{}\" is \"{}\" (tokenizer_config.json names no class): {} holds no "
              "tokenizer nmt-train reads ({})",
              model_file, kClassKey, model.tokenizer_class, dir.string(), kKnown);
    return *kind;
  }
  NMT_CHECK(!model.model_type.empty(), DataError,
            "{}: key \"{}\" is missing: cannot tell which tokenizer this is ({} expected)",
            config_file.string(), kClassKey, kKnown);
  HfTokenizerKind kind = HfTokenizerKind::kMarian;
  const char* class_name = "MarianTokenizer";
  if (model.model_type == "m2m_100") {
    kind = HfTokenizerKind::kM2M100;
    class_name = "M2M100Tokenizer";
  } else {
    NMT_CHECK(model.model_type == "marian", DataError,
              "{}: key \"{}\" is missing, and config.json's model_type \"{}\" has no tokenizer "
              "nmt-train reads ({} expected)",
              config_file.string(), kClassKey, model.model_type, kKnown);
  }
  const bool separate = config.contains("separate_vocabs") &&
                        config.at("separate_vocabs").is_boolean() &&
                        config.at("separate_vocabs").get<bool>();
  for (const char* file : files_read(kind, separate)) {
    NMT_CHECK(std::filesystem::exists(dir / file), DataError,
              "{}: missing: {} names no tokenizer_class, so config.json's model_type \"{}\" makes "
              "it {} (as AutoTokenizer does), which reads this file{}",
              (dir / file).string(), config_file.filename().string(), model.model_type, class_name,
              kind == HfTokenizerKind::kM2M100
                  ? "; an NLLB directory names \"tokenizer_class\": \"NllbTokenizer\" in "
                    "tokenizer_config.json"
                  : "");
  }
  return kind;
}

}  // namespace nmt::hf
