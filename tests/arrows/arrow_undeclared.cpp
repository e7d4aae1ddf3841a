// Compiled by the test arrows.undeclared_transitive_include_fails, which passes only when this
// file does NOT compile: its target links nmt::trainer, which uses checkpoint/ privately, so
// checkpoint/'s headers must be invisible to it. A user of the trainer that includes them (as
// job/ does) declares the arrow by linking nmt::checkpoint itself.
#include "train/trainer.h"
#include "checkpoint/checkpoint_dir.h"

int arrow_undeclared() { return 0; }
