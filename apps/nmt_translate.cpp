// nmt-translate: translate text with a checkpoint of nmt-train (greedy, beam search or
// sampling), as one process or, for a whole corpus, on every rank (job/translate_job.h).

#include "config/translate_cli.h"
#include "job/translate_job.h"
#include "util/main_guard.h"

int main(int argc, char** argv) {
  return nmt::run_main("nmt-translate", [&] {
    const nmt::config::TranslateCommand command = nmt::config::parse_translate_command(argc, argv);
    if (command.exit_code) return *command.exit_code;
    return nmt::job::run_translate_command(command, argc, argv);
  });
}
