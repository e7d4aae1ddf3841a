#include "eval/tokenizer.h"

#include "eval/unicode.h"

namespace nmt::eval {
namespace {

/// Python's str.replace(from, to): one left-to-right pass, the output is not rescanned.
void replace_all(const std::string& in, std::string_view from, std::string_view to,
                 std::string& out) {
  out.clear();
  size_t pos = 0;
  for (size_t hit; (hit = in.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(in, pos, hit - pos);
    out.append(to);
  }
  out.append(in, pos, std::string::npos);
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_period_or_comma(char c) { return c == '.' || c == ','; }

/// The character class of the first regex, [\{-\~\[-\` -\&\(-\+\:-\@\/]: ASCII punctuation
/// and space except ' , - . (and the digits and letters).
bool is_split_symbol(char c) {
  return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= ' ' && c <= '&') ||
         (c >= '(' && c <= '+') || (c >= ':' && c <= '@') || c == '/';
}

// The regexes work on code points, these passes on bytes. That is equivalent: every byte
// the patterns name is ASCII, [^0-9] matches one code point of a multi-byte character iff
// it matches that character's last byte (when followed by [.,]) or first byte (when
// preceded by [.,]), and no UTF-8 continuation byte is ASCII.

}  // namespace

std::string Tokenizer13a::operator()(std::string_view line) {
  std::string out;
  tokenize(line, out);
  return out;
}

void Tokenizer13a::tokenize(std::string_view line, std::string& out) {
  // Language-independent part (Tokenizer13a.__call__).
  a_.assign(line);
  if (a_.find('<') != std::string::npos) {
    replace_all(a_, "<skipped>", "", b_);
    a_.swap(b_);
  }
  if (a_.find('\n') != std::string::npos) {
    replace_all(a_, "-\n", "", b_);
    replace_all(b_, "\n", " ", a_);
  }
  if (a_.find('&') != std::string::npos) {
    replace_all(a_, "&quot;", "\"", b_);
    replace_all(b_, "&amp;", "&", a_);
    replace_all(a_, "&lt;", "<", b_);
    replace_all(b_, "&gt;", ">", a_);
  }
  // TokenizerRegexp on f' {line} ' (the padding matters to the patterns below).
  b_.clear();
  b_.push_back(' ');
  b_.append(a_);
  b_.push_back(' ');
  a_.clear();
  for (char c : b_) {  // ([\{-\~\[-\` -\&\(-\+\:-\@\/]) -> ' \1 '
    if (is_split_symbol(c)) {
      a_.push_back(' ');
      a_.push_back(c);
      a_.push_back(' ');
    } else {
      a_.push_back(c);
    }
  }
  a_.swap(b_);
  a_.clear();
  for (size_t i = 0; i < b_.size();) {  // ([^0-9])([\.,]) -> '\1 \2 '
    if (i + 1 < b_.size() && !is_digit(b_[i]) && is_period_or_comma(b_[i + 1])) {
      a_.push_back(b_[i]);
      a_.push_back(' ');
      a_.push_back(b_[i + 1]);
      a_.push_back(' ');
      i += 2;
    } else {
      a_.push_back(b_[i++]);
    }
  }
  b_.clear();
  for (size_t i = 0; i < a_.size();) {  // ([\.,])([^0-9]) -> ' \1 \2'
    if (i + 1 < a_.size() && is_period_or_comma(a_[i]) && !is_digit(a_[i + 1])) {
      b_.push_back(' ');
      b_.push_back(a_[i]);
      b_.push_back(' ');
      b_.push_back(a_[i + 1]);
      i += 2;
    } else {
      b_.push_back(a_[i++]);
    }
  }
  a_.clear();
  for (size_t i = 0; i < b_.size();) {  // ([0-9])(-) -> '\1 \2 '
    if (i + 1 < b_.size() && is_digit(b_[i]) && b_[i + 1] == '-') {
      a_.push_back(b_[i]);
      a_.push_back(' ');
      a_.push_back('-');
      a_.push_back(' ');
      i += 2;
    } else {
      a_.push_back(b_[i++]);
    }
  }
  // ' '.join(line.split())
  words_.clear();
  split_words(a_, words_);
  out.clear();
  for (size_t i = 0; i < words_.size(); ++i) {
    if (i) out.push_back(' ');
    out.append(words_[i]);
  }
}

}  // namespace nmt::eval
