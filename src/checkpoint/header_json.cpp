#include "checkpoint/header_json.h"

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "util/json_text.h"

namespace nmt::checkpoint {

nlohmann::ordered_json parse_header_json(std::string_view text) {
  using Json = nlohmann::ordered_json;
  using Event = Json::parse_event_t;
  std::vector<std::set<std::string>> keys;  // of each object being parsed, innermost last
  const Json::parser_callback_t check = [&keys](int depth, Event event, Json& parsed) {
    if (event == Event::object_start || event == Event::array_start) {
      if (depth >= kMaxHeaderDepth)
        throw HeaderJsonError(fmt::format("more than {} levels of nesting", kMaxHeaderDepth));
      if (event == Event::object_start) keys.emplace_back();
    } else if (event == Event::object_end) {
      keys.pop_back();
    } else if (event == Event::key) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!keys.back().insert(key).second)
        throw HeaderJsonError(fmt::format("duplicate key {}", json::quote(key)));
    } else if (event == Event::value) {
      if (parsed.is_boolean() || parsed.is_null())
        throw HeaderJsonError(
            fmt::format("{}: expected an object, array, string or integer", parsed.dump()));
      // nlohmann reads an integer beyond int64 as unsigned, or beyond that as a real.
      if (parsed.is_number_float()) {
        throw HeaderJsonError(fmt::format("real number {}: expected an integer in the 64-bit range",
                                          json::line(parsed)));
      }
      if (parsed.is_number_unsigned() && parsed.get<uint64_t>() > uint64_t{INT64_MAX}) {
        throw HeaderJsonError(fmt::format("number {}: expected an integer in the 64-bit range",
                                          parsed.get<uint64_t>()));
      }
    }
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), check);
  } catch (const Json::exception& e) {
    // "[json.exception.parse_error.101] parse error at line 1, column 9: ...": the tag says
    // nothing to a reader.
    const std::string_view what = e.what();
    const size_t tag_end = what.rfind("] ", what.find(' '));
    throw HeaderJsonError(
        std::string(tag_end == std::string_view::npos ? what : what.substr(tag_end + 2)));
  }
}

}  // namespace nmt::checkpoint
