#pragma once
// Whether building a model draws its initial values. A model that a checkpoint is about to fill
// (nmt-translate, nmt-score) need not: for NLLB-1.3B the draws are 1.3 billion random numbers,
// seconds of start-up, all of them overwritten. Like at::NoGradGuard, a scope on this thread.

namespace nmt::model {

/// While one lives on this thread, the modules of model/ register their parameters without
/// drawing or setting their values: the memory is as allocated (uninitialized), for a
/// checkpoint to fill. Only for a model all of whose parameters are then copied in (the loader
/// checks each is found); buffers computed from the shape (positions) are still computed.
class SkipInitialization {
 public:
  SkipInitialization();
  ~SkipInitialization();
  SkipInitialization(const SkipInitialization&) = delete;
  SkipInitialization& operator=(const SkipInitialization&) = delete;

 private:
  bool was_skipping_;
};

/// False inside a SkipInitialization on this thread: then parameters are left as allocated.
bool initializing();

}  // namespace nmt::model
