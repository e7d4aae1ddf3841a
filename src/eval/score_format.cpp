#include "eval/score_format.h"

#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

namespace nmt::eval {
namespace {

std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
    } else {
      out.push_back(c);
    }
  }
  return out + "\"";
}

/// Python's repr of float(text): the shortest round-trip digits, with ".0" on integers.
std::string python_float_repr(const std::string& text) {
  std::string out = fmt::format("{}", std::strtod(text.c_str(), nullptr));
  if (out.find_first_of(".eEn") == std::string::npos) out += ".0";  // n: nan/inf
  return out;
}

}  // namespace

std::string format_fixed(double score, int width) {
  // glibc's printf rounds the exact binary value half-to-even, as Python's formatting does.
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", width, score);
  return buffer;
}

std::string format_text(const MetricScore& score, int width, bool with_signature) {
  std::string out = score.name;
  if (with_signature && !score.signature.empty()) out += "|" + score.signature;
  out += " = " + format_fixed(score.score, width);
  if (!score.verbose.empty()) out += " " + score.verbose;
  return out;
}

std::string format_json(const MetricScore& score, int width) {
  std::string out = "{\n";
  out += " \"name\": " + json_string(score.name) + ",\n";
  out += " \"score\": " + python_float_repr(format_fixed(score.score, width)) + ",\n";
  out += " \"signature\": " + json_string(score.signature);
  if (!score.verbose.empty()) out += ",\n \"verbose_score\": " + json_string(score.verbose);
  std::string_view rest = score.signature;
  while (!rest.empty()) {
    const size_t bar = rest.find('|');
    const std::string_view field = rest.substr(0, bar);
    const size_t colon = field.find(':');
    out += ",\n " + json_string(field.substr(0, colon)) + ": " +
           json_string(colon == std::string_view::npos ? "" : field.substr(colon + 1));
    rest = bar == std::string_view::npos ? std::string_view() : rest.substr(bar + 1);
  }
  return out + "\n}";
}

std::string align_text_lines(const std::vector<std::string>& lines) {
  std::string out;
  if (lines.size() == 1) return lines[0] + "\n";
  size_t width = 0;
  for (const std::string& line : lines) {
    const size_t eq = line.find('=');
    if (eq != std::string::npos && eq >= 1) width = std::max(width, eq - 1);
  }
  for (const std::string& line : lines) {
    const size_t eq = line.find('=');
    if (eq == std::string::npos || eq < 1) {
      out += line + "\n";
      continue;
    }
    out += std::string(width - (eq - 1), ' ') + line + "\n";
  }
  return out;
}

std::string join_json(const std::vector<std::string>& objects) {
  if (objects.size() == 1) return objects[0] + "\n";
  std::string out = "[\n";
  for (size_t i = 0; i < objects.size(); ++i) out += (i ? ",\n" : "") + objects[i];
  return out + "\n]\n";
}

}  // namespace nmt::eval
