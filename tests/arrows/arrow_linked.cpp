// Compiled by the test arrows.linked_component_include_compiles: a target that links nmt::data
// sees data/ and, through it, util/.
#include "data/data_options.h"
#include "util/error.h"

int arrow_linked() { return static_cast<int>(nmt::data::DataOptions{}.max_len); }
