#pragma once
// Reading hypothesis and reference files as sacreBLEU's command line does: UTF-8, one segment
// per '\n'-terminated line, trailing whitespace stripped.

#include <istream>
#include <string>
#include <vector>

namespace nmt::eval {

/// The lines of a UTF-8 text stream: split at '\n' only (a final line without '\n' counts, an
/// empty stream has no lines), each with trailing Python whitespace removed (str.rstrip(),
/// which also drops a '\r'). Throws nmt::DataError "NAME:LINE: invalid UTF-8 at byte B"
/// (B counted from 1 within the line), where NAME is name.
std::vector<std::string> read_text_lines(std::istream& in, const std::string& name);

/// read_text_lines of a file; throws nmt::DataError when it cannot be opened or read.
std::vector<std::string> read_text_file(const std::string& path);

}  // namespace nmt::eval
