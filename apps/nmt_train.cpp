// nmt-train: parse the command line, then run what it asks for (job/train_job.h): print the
// config, a dry run, the built-in launcher, a benchmark, or training.
#include "config/train_cli.h"
#include "job/train_job.h"
#include "util/main_guard.h"

int main(int argc, char** argv) {
  return nmt::run_main("nmt-train", [&] {
    const nmt::config::TrainCommand command = nmt::config::parse_train_command(argc, argv);
    if (command.exit_code) return *command.exit_code;
    return nmt::job::run_train_command(command, argc, argv);
  });
}
