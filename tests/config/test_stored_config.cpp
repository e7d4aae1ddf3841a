// config/stored_config: the parts of a checkpoint's stored config that readers outside config/
// take on their own.
#include <catch2/catch.hpp>

#include "config/run_config.h"
#include "config/stored_config.h"

using nmt::config::RunConfig;

namespace {

/// The model section as import-hf cut it from the stored YAML before config/ wrote it (the
/// lines from "model:" up to the next line that is not indented).
std::string sliced_model_section(const std::string& yaml) {
  const size_t begin = yaml.find("model:\n");
  if (begin == std::string::npos) return {};
  size_t end = begin;
  while ((end = yaml.find('\n', end)) != std::string::npos && end + 1 < yaml.size() &&
         yaml[end + 1] == ' ')
    ++end;
  return yaml.substr(begin, end == std::string::npos ? std::string::npos : end + 1 - begin);
}

RunConfig imported_like() {
  RunConfig c;
  c.model.d_model = 64;
  c.model.heads = 4;
  c.model.output_bias = true;
  c.data.vocab_size = 1000;
  c.train.init_from = "/models/opus-mt-en-de";
  return c;
}

}  // namespace

TEST_CASE("stored_config: the model section is to_yaml's, as it was cut from it", "[config]") {
  const RunConfig c = imported_like();
  const std::string yaml = nmt::config::to_yaml(c, /*with_docs=*/false);
  const std::string section = nmt::config::model_section_yaml(c);
  CHECK(section.rfind("model:\n", 0) == 0);
  CHECK(section == sliced_model_section(yaml));
  CHECK(yaml.find(section) != std::string::npos);
}

TEST_CASE("stored_config: the model options of a stored config", "[config]") {
  const RunConfig c = imported_like();
  const nmt::model::ModelOptions read =
      nmt::config::stored_model_options(nmt::config::to_yaml(c, false), "ckpt");
  CHECK(read.d_model == 64);
  CHECK(read.heads == 4);
  CHECK(read.output_bias);
  // The model section alone is a stored config too: the rest keeps its defaults.
  CHECK(nmt::config::stored_model_options(nmt::config::model_section_yaml(c), "section").d_model ==
        64);
}
