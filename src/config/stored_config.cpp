#include "config/stored_config.h"

#include "config/run_schema.h"

namespace nmt::config {

model::ModelOptions stored_model_options(const std::string& yaml, const std::string& origin) {
  return parse_stored_config(yaml, origin).model;
}

std::string model_section_yaml(const RunConfig& config) {
  RunConfig copy = config;  // bind() binds for writing; the caller's config stays as it is
  return bind(copy).section_to_yaml("model", /*with_docs=*/false);
}

}  // namespace nmt::config
