#pragma once
// sacreBLEU's default BLEU tokenizer "13a" (mteval-v13a.pl), reproduced byte for byte from
// sacrebleu 2.6.0's tokenizers/tokenizer_13a.py and tokenizer_re.py.

#include <string>
#include <string_view>
#include <vector>

namespace nmt::eval {

/// Tokenizes like sacrebleu's Tokenizer13a: drops "<skipped>", joins "-\n", turns newlines
/// into spaces, unescapes &quot; &amp; &lt; &gt; (in that order, each one pass), then applies
/// the four regexes of TokenizerRegexp and joins the words with single spaces. Keeps its
/// scratch buffers between calls, so reuse one instance in loops.
///   Tokenizer13a tok;  tok("Hello, world!") == "Hello , world !"
class Tokenizer13a {
 public:
  /// The tokenized line: words separated by single spaces, no leading or trailing space.
  std::string operator()(std::string_view line);
  /// Same, written into out (replacing its contents; keeps its capacity).
  void tokenize(std::string_view line, std::string& out);

 private:
  std::string a_, b_;                    ///< ping-pong buffers of the rewriting passes
  std::vector<std::string_view> words_;  ///< words of the last pass
};

}  // namespace nmt::eval
