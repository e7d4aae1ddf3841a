#include "checkpoint/run_metadata.h"

#include <cerrno>
#include <cmath>
#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "util/error.h"

namespace nmt::checkpoint {
namespace {

const std::string* find(const std::map<std::string, std::string>& metadata, std::string_view key) {
  const auto it = metadata.find(std::string(key));
  return it == metadata.end() ? nullptr : &it->second;
}

int64_t parse_integer(const std::string& text, std::string_view key, const std::string& origin) {
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  NMT_CHECK(!text.empty() && errno == 0 && *end == '\0', CheckpointError,
            "{}: metadata {}: expected an integer, found '{}'", origin, key, text);
  return value;
}

double parse_number(const std::string& text, std::string_view key, const std::string& origin) {
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  NMT_CHECK(!text.empty() && errno == 0 && *end == '\0', CheckpointError,
            "{}: metadata {}: expected a number, found '{}'", origin, key, text);
  return value;
}

/// Reads key into *out when present.
void read(const std::map<std::string, std::string>& m, std::string_view key,
          const std::string& origin, int64_t* out) {
  if (const std::string* v = find(m, key)) *out = parse_integer(*v, key, origin);
}
void read(const std::map<std::string, std::string>& m, std::string_view key,
          const std::string& origin, double* out) {
  if (const std::string* v = find(m, key)) *out = parse_number(*v, key, origin);
}
void read(const std::map<std::string, std::string>& m, std::string_view key,
          const std::string& origin, std::optional<double>* out) {
  if (const std::string* v = find(m, key)) *out = parse_number(*v, key, origin);
}
void read(const std::map<std::string, std::string>& m, std::string_view key,
          const std::string& origin, std::string* out) {
  if (const std::string* v = find(m, key)) *out = *v;
}
void read(const std::map<std::string, std::string>& m, std::string_view key,
          const std::string& origin, bool* out) {
  const std::string* v = find(m, key);
  if (!v) return;
  NMT_CHECK(*v == "true" || *v == "false", CheckpointError,
            "{}: metadata {}: expected true or false, found '{}'", origin, key, *v);
  *out = *v == "true";
}

std::string number(double v) { return fmt::format("{}", v); }

}  // namespace

std::map<std::string, std::string> RunMetadata::to_map() const {
  using namespace meta_key;
  std::map<std::string, std::string> m = {
      {std::string(kStep), std::to_string(step)},
      {std::string(kEpoch), std::to_string(epoch)},
      {std::string(kIteratorEpoch), std::to_string(iterator_epoch)},
      {std::string(kIteratorStep), std::to_string(iterator_step)},
      {std::string(kWorldSize), std::to_string(world_size)},
      {std::string(kIteratorConsumed), iterator_consumed},
      {std::string(kConfig), config},
      {std::string(kConfigHash), config_hash},
      {std::string(kVocabFingerprint), vocab_fingerprint},
      {std::string(kVocabJoint), vocab_joint ? "true" : "false"},
      {std::string(kElapsed), number(elapsed_s)},
      {std::string(kWithoutImprovement), std::to_string(validations_without_improvement)},
  };
  const auto put = [&m](std::string_view key, const std::optional<double>& v) {
    if (v) m[std::string(key)] = number(*v);
  };
  if (update_freq > 0) m[std::string(kUpdateFreq)] = std::to_string(update_freq);
  put(kValidLoss, valid_loss);
  put(kValidBleu, valid_bleu);
  put(kValidChrf, valid_chrf);
  put(kSelection, selection);
  put(kBestSelection, best_selection);
  // Only for runs that name languages, so other checkpoints keep exactly their old metadata.
  if (!languages.empty()) {
    std::string list;
    for (const std::string& language : languages) list += (list.empty() ? "" : ",") + language;
    m[std::string(kLanguages)] = list;
  }
  if (target_lang_tags) m[std::string(kLangTags)] = "target";
  return m;
}

RunMetadata RunMetadata::parse(const std::map<std::string, std::string>& m,
                               const std::string& origin) {
  using namespace meta_key;
  RunMetadata r;
  read(m, kStep, origin, &r.step);
  read(m, kEpoch, origin, &r.epoch);
  read(m, kIteratorEpoch, origin, &r.iterator_epoch);
  read(m, kIteratorStep, origin, &r.iterator_step);
  read(m, kWorldSize, origin, &r.world_size);
  read(m, kUpdateFreq, origin, &r.update_freq);
  read(m, kIteratorConsumed, origin, &r.iterator_consumed);
  read(m, kConfig, origin, &r.config);
  read(m, kConfigHash, origin, &r.config_hash);
  read(m, kVocabFingerprint, origin, &r.vocab_fingerprint);
  read(m, kVocabJoint, origin, &r.vocab_joint);
  read(m, kElapsed, origin, &r.elapsed_s);
  read(m, kValidLoss, origin, &r.valid_loss);
  read(m, kValidBleu, origin, &r.valid_bleu);
  read(m, kValidChrf, origin, &r.valid_chrf);
  read(m, kSelection, origin, &r.selection);
  read(m, kBestSelection, origin, &r.best_selection);
  read(m, kWithoutImprovement, origin, &r.validations_without_improvement);
  if (const std::string* v = find(m, kLanguages)) {
    for (size_t begin = 0; begin <= v->size();) {
      const size_t end = std::min(v->find(',', begin), v->size());
      r.languages.push_back(v->substr(begin, end - begin));
      NMT_CHECK(!r.languages.back().empty(), CheckpointError,
                "{}: metadata {}: expected comma-separated language codes, found '{}'", origin,
                kLanguages, *v);
      begin = end + 1;
    }
  }
  if (const std::string* v = find(m, kLangTags)) {
    NMT_CHECK(*v == "target", CheckpointError, "{}: metadata {}: expected target, found '{}'",
              origin, kLangTags, *v);
    r.target_lang_tags = true;
  }
  NMT_CHECK(r.step >= 0 && r.iterator_epoch >= 1 && r.iterator_step >= 0 && r.world_size >= 1 &&
                r.update_freq >= 0,
            CheckpointError,
            "{}: metadata out of range: step {}, iterator_epoch {}, iterator_step {}, "
            "world_size {}, update_freq {}",
            origin, r.step, r.iterator_epoch, r.iterator_step, r.world_size, r.update_freq);
  return r;
}

RunMetadata RunMetadata::parse_resumable(const std::map<std::string, std::string>& m,
                                         const std::string& origin) {
  using namespace meta_key;
  for (std::string_view key : {kStep, kEpoch, kIteratorEpoch, kIteratorStep, kWorldSize, kConfig,
                               kConfigHash, kVocabFingerprint, kElapsed}) {
    NMT_CHECK(find(m, key) != nullptr, CheckpointError,
              "{}: no metadata key \"{}\": not a checkpoint that training can resume from",
              origin, key);
  }
  return parse(m, origin);
}

std::optional<double> selection_of(const std::map<std::string, std::string>& metadata) {
  const std::string* v = find(metadata, meta_key::kSelection);
  if (!v || v->empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(v->c_str(), &end);
  if (errno != 0 || *end != '\0' || !std::isfinite(value)) return std::nullopt;
  return value;
}

}  // namespace nmt::checkpoint
