#pragma once
// What one nmt-translate invocation does: translate as one process (a filter, as always), or
// decode a corpus on every rank (decode/corpus_translation.h): start this node's workers with
// the built-in launcher (--nproc-per-node N), or run as one of them (started by it, torchrun,
// mpirun or Slurm), each on its own GPU or its share of the CPUs.

#include "config/translate_cli.h"

namespace nmt::job {

/// Runs a parsed nmt-translate command line (argv: the workers' command line). Returns the exit
/// code; throws nmt::Error subclasses, which main reports.
int run_translate_command(const config::TranslateCommand& command, int argc, char** argv);

}  // namespace nmt::job
