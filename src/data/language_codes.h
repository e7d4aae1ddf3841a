#pragma once
// ISO 639 language codes and the languages corpora name, for checking data.train's src_lang
// and tgt_lang where the config is read (config/ sees only the options headers of data/, so
// this is header-only and Torch-free). The codes are a generated table (data/iso639_codes.h),
// not read at run time: nmt-train needs no iso-codes package, and a typo that is no code is
// refused rather than trained as a language of its own.

#include <algorithm>
#include <cstddef>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "data/data_options.h"
#include "data/iso639_codes.h"

namespace nmt::data {

/// True when `code` is one of `table`'s codes: a sorted run of codes of `code`'s length.
inline bool in_code_table(std::string_view table, std::string_view code) {
  const size_t width = code.size();
  size_t low = 0, high = table.size() / width;
  while (low < high) {
    const size_t mid = low + (high - low) / 2;
    const int order = table.substr(mid * width, width).compare(code);
    if (order == 0) return true;
    if (order < 0) {
      low = mid + 1;
    } else {
      high = mid;
    }
  }
  return false;
}

/// True for an ISO 639 language code of the list data/iso639_codes.h holds (generated from
/// Debian's iso-codes): two letters of ISO 639-1 ("de"), or three of ISO 639-3 / 639-2
/// ("deu", "ger", "gsw"), lowercase, optionally with a script ("zho_Hant", NLLB's form). A
/// typo that is no code ("deo") is refused; one that is another language's code ("dee",
/// Dewoin, for "deu") cannot be told from it.
inline bool is_language_code(std::string_view code) {
  if (code.size() == 2) return in_code_table(kIso639TwoLetterCodes, code);
  if (code.size() == 3) return in_code_table(kIso639ThreeLetterCodes, code);
  // A code with its script, as NLLB names languages ("zho_Hant"): an ISO 15924 script is four
  // letters, the first uppercase (not checked against the list: NLLB's are all real ones).
  const size_t cut = code.find('_');
  if (cut == std::string_view::npos || code.size() != cut + 5 ||
      !is_language_code(code.substr(0, cut)))
    return false;
  const auto lower = [](char c) { return c >= 'a' && c <= 'z'; };
  return code[cut + 1] >= 'A' && code[cut + 1] <= 'Z' && lower(code[cut + 2]) &&
         lower(code[cut + 3]) && lower(code[cut + 4]);
}

/// The other code of a language that ISO 639-1 names: "deu" for "de", "de" for "deu"; empty
/// for a code without one (e.g. "gsw").
inline std::string_view paired_language_code(std::string_view code) {
  if (code.size() != 2 && code.size() != 3) return {};
  for (size_t at = 0; at + 5 <= kIso639TwoToThree.size(); at += 5) {
    const std::string_view two = kIso639TwoToThree.substr(at, 2);
    const std::string_view three = kIso639TwoToThree.substr(at + 2, 3);
    if (code == two) return three;
    if (code == three) return two;
  }
  return {};
}

/// What a language key expects, for messages: the forms and an example of each.
inline constexpr std::string_view kLanguageCodeForms =
    "an ISO 639 language code: two letters of ISO 639-1 (e.g. de, en) or three of ISO 639-3 "
    "(e.g. deu, gsw), optionally with an ISO 15924 script (e.g. zho_Hant)";

/// The languages that `corpora` name (src_lang and tgt_lang), sorted and unique.
inline std::vector<std::string> corpus_languages(const std::vector<CorpusOptions>& corpora) {
  std::set<std::string> languages;
  for (const CorpusOptions& corpus : corpora)
    for (const std::string* code : {&corpus.src_lang, &corpus.tgt_lang})
      if (!code->empty()) languages.insert(*code);
  return {languages.begin(), languages.end()};
}

}  // namespace nmt::data
