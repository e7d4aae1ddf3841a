#pragma once
// ISO 639 language codes and the languages corpora name, for checking data.train's src_lang
// and tgt_lang where the config is read (config/ sees only the options headers of data/, so
// this is header-only and Torch-free).

#include <algorithm>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "data/data_options.h"

namespace nmt::data {

/// The ISO 639-1 codes (2023 list, 183 codes).
inline constexpr std::string_view kIso639_1[] = {
    "aa", "ab", "ae", "af", "ak", "am", "an", "ar", "as", "av", "ay", "az", "ba", "be", "bg",
    "bi", "bm", "bn", "bo", "br", "bs", "ca", "ce", "ch", "co", "cr", "cs", "cu", "cv", "cy",
    "da", "de", "dv", "dz", "ee", "el", "en", "eo", "es", "et", "eu", "fa", "ff", "fi", "fj",
    "fo", "fr", "fy", "ga", "gd", "gl", "gn", "gu", "gv", "ha", "he", "hi", "ho", "hr", "ht",
    "hu", "hy", "hz", "ia", "id", "ie", "ig", "ii", "ik", "io", "is", "it", "iu", "ja", "jv",
    "ka", "kg", "ki", "kj", "kk", "kl", "km", "kn", "ko", "kr", "ks", "ku", "kv", "kw", "ky",
    "la", "lb", "lg", "li", "ln", "lo", "lt", "lu", "lv", "mg", "mh", "mi", "mk", "ml", "mn",
    "mr", "ms", "mt", "my", "na", "nb", "nd", "ne", "ng", "nl", "nn", "no", "nr", "nv", "ny",
    "oc", "oj", "om", "or", "os", "pa", "pi", "pl", "ps", "pt", "qu", "rm", "rn", "ro", "ru",
    "rw", "sa", "sc", "sd", "se", "sg", "si", "sk", "sl", "sm", "sn", "so", "sq", "sr", "ss",
    "st", "su", "sv", "sw", "ta", "te", "tg", "th", "ti", "tk", "tl", "tn", "to", "tr", "ts",
    "tt", "tw", "ty", "ug", "uk", "ur", "uz", "ve", "vi", "vo", "wa", "wo", "xh", "yi", "yo",
    "za", "zh", "zu"};

/// True for an ISO 639 language code: a two-letter ISO 639-1 code of the standard's list, or
/// three lowercase letters (an ISO 639-2/3 code; that list of some 7,900 codes is not kept
/// here, so only its form is checked).
inline bool is_language_code(std::string_view code) {
  if (code.size() == 2) return std::find(std::begin(kIso639_1), std::end(kIso639_1), code) != std::end(kIso639_1);
  return code.size() == 3 &&
         std::all_of(code.begin(), code.end(), [](char c) { return c >= 'a' && c <= 'z'; });
}

/// The languages that `corpora` name (src_lang and tgt_lang), sorted and unique.
inline std::vector<std::string> corpus_languages(const std::vector<CorpusOptions>& corpora) {
  std::set<std::string> languages;
  for (const CorpusOptions& corpus : corpora)
    for (const std::string* code : {&corpus.src_lang, &corpus.tgt_lang})
      if (!code->empty()) languages.insert(*code);
  return {languages.begin(), languages.end()};
}

}  // namespace nmt::data
