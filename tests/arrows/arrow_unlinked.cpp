// Compiled by the test arrows.unlinked_component_include_fails, which passes only when this
// file does NOT compile: its target links nmt::data, not nmt::train, so train/'s headers must
// be invisible to it (data/ must never depend on train/).
#include "data/data_options.h"
#include "train/lr_schedule.h"

int arrow_unlinked() { return 0; }
