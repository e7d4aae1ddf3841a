#include "config/model_bounds.h"

#include <fmt/format.h>

#include "config/run_schema.h"
#include "util/error.h"

namespace nmt::config {
namespace {

/// Whether `field` takes its own printed value back: what the schema's parse checks.
bool accepts_own_value(const Field& field) {
  try {
    field.parse(YAML::Node(field.print()), Origin{"check", 0, 0});
    return true;
  } catch (const ConfigError&) {
    return false;
  }
}

}  // namespace

std::optional<OutOfBounds> model_out_of_bounds(const model::ModelOptions& model) {
  RunConfig config;
  config.model = model;
  const Schema schema = bind(config);
  for (const Field& field : schema.fields()) {
    if (field.key.rfind("model.", 0) != 0 || !field.print || !field.parse) continue;
    if (!accepts_own_value(field)) return OutOfBounds{field.key, field.print(), field.expected};
  }
  return std::nullopt;
}

std::optional<std::string> vocab_size_out_of_bounds(int64_t size) {
  RunConfig config;
  config.data.vocab_size = size;
  const Schema schema = bind(config);
  const Field* field = schema.find("data.vocab_size");
  if (field == nullptr || accepts_own_value(*field)) return std::nullopt;
  return field->expected;
}

}  // namespace nmt::config
