// nmt-translate: translate text with a checkpoint of nmt-train (greedy, beam search or sampling).

#include "config/stored_config.h"
#include "config/translate_cli.h"
#include "decode/translator.h"
#include "util/atomic_file.h"
#include "util/json_text.h"
#include "util/log.h"
#include "util/main_guard.h"

namespace {

using namespace nmt;

int run(int argc, char** argv) {
  const config::TranslateCommand command = config::parse_translate_command(argc, argv);
  if (command.exit_code) return *command.exit_code;
  log::LogOptions log_options;
  log::parse_level(command.log_level, &log_options.level);
  log::init(log_options);
  decode::Translator translator(command.options, config::stored_model_options);
  const decode::TranslateStats stats = translator.translate_file(command.input, command.output);
  if (!command.stats_json.empty()) {
    const double seconds = stats.seconds;
    nlohmann::ordered_json o;
    o["sentences"] = stats.sentences;
    o["source_tokens"] = stats.source_tokens;
    o["output_tokens"] = stats.output_tokens;
    o["seconds"] = seconds;
    o["sentences_per_s"] = seconds > 0 ? double(stats.sentences) / seconds : 0.0;
    o["output_tokens_per_s"] = seconds > 0 ? double(stats.output_tokens) / seconds : 0.0;
    write_file_atomically(command.stats_json, json::pretty(o));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return nmt::run_main("nmt-translate", [&] { return run(argc, argv); });
}
