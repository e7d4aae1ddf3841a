// ISO 639 codes (data/language_codes.h over the generated data/iso639_codes.h).
#include <catch2/catch.hpp>

#include "data/language_codes.h"

using nmt::data::is_language_code;

TEST_CASE("language codes: two letters of ISO 639-1, three of ISO 639-3 or 639-2, from the list",
          "[data]") {
  for (const char* code : {"de", "en", "zh", "sw", "sh", "aa", "zu"}) CHECK(is_language_code(code));
  // ISO 639-3 (individual languages, macrolanguages, special codes), 639-2's bibliographic
  // and collective codes, and the local-use range qaa-qtz.
  for (const char* code : {"deu", "eng", "haw", "gsw", "aaa", "zzj", "zho", "mul", "und", "zxx",
                           "ger", "fre", "chi", "gem", "qaa", "qtz"})
    CHECK(is_language_code(code));
  // Of the right form, but no code: slips for deu and eng, gaps, and past the table's end.
  for (const char* code : {"deo", "enz", "xyz", "quu", "qzz", "zzz", "xx", "qq"})
    CHECK_FALSE(is_language_code(code));
  for (const char* code : {"", "e", "EN", "Deu", "en-US", "de1", "<2de>", "deut"})
    CHECK_FALSE(is_language_code(code));
  // With a script, as NLLB names languages: a code, "_", four letters in title case.
  for (const char* code : {"zho_Hant", "deu_Latn", "de_Latn", "srp_Cyrl"})
    CHECK(is_language_code(code));
  for (const char* code : {"xyz_Latn", "deu_latn", "deu_LATN", "deu_Lat", "deu_Latin", "deu_",
                           "_Latn", "deu_Latn_Latn"})
    CHECK_FALSE(is_language_code(code));
}

TEST_CASE("the generated tables are sorted runs of lowercase codes of one width", "[data]") {
  // The binary search relies on it; the generator writes them so.
  const auto check = [](std::string_view table, size_t width, size_t at_least) {
    REQUIRE(table.size() % width == 0);
    CHECK(table.size() / width >= at_least);
    size_t not_lowercase = 0, out_of_order = 0;
    for (char c : table) not_lowercase += !(c >= 'a' && c <= 'z');
    for (size_t i = width; i < table.size(); i += width)
      out_of_order += !(table.substr(i - width, width) < table.substr(i, width));
    CHECK(not_lowercase == 0);
    CHECK(out_of_order == 0);
  };
  check(nmt::data::kIso639TwoLetterCodes, 2, 180);
  check(nmt::data::kIso639ThreeLetterCodes, 3, 8000);
  // Every entry is found by the lookup (first, last and each in between).
  const std::string_view three = nmt::data::kIso639ThreeLetterCodes;
  size_t found = 0;
  for (size_t i = 0; i < three.size(); i += 3) found += is_language_code(three.substr(i, 3));
  CHECK(found == three.size() / 3);
}
