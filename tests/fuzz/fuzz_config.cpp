// Fuzz target: the config loader on arbitrary YAML (the text a checkpoint stores, or a file).
// Every input must either load or fail with nmt::Error (one clear message); anything else (a
// crash, a sanitizer report, an exception that is not ours) is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "config/run_config.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string yaml(reinterpret_cast<const char*>(data), size);
  try {
    const nmt::config::RunConfig config = nmt::config::parse_stored_config(yaml, "fuzz.yaml");
    // What loads must print and load back the same.
    const std::string printed = nmt::config::to_yaml(config, /*with_docs=*/false);
    const nmt::config::RunConfig again = nmt::config::parse_stored_config(printed, "printed");
    if (nmt::config::to_yaml(again, false) != printed) __builtin_trap();
  } catch (const nmt::Error&) {
    // A clear, expected rejection.
  }
  return 0;
}
