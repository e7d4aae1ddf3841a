#include "model/initialization.h"

namespace nmt::model {
namespace {

thread_local bool skipping = false;

}  // namespace

SkipInitialization::SkipInitialization() : was_skipping_(skipping) { skipping = true; }

SkipInitialization::~SkipInitialization() { skipping = was_skipping_; }

bool initializing() { return !skipping; }

}  // namespace nmt::model
