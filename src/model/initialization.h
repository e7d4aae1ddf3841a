#pragma once
// Whether building a model draws its initial values. A model that a checkpoint is about to fill
// (nmt-translate's) need not: for NLLB-1.3B the draws are 1.3 billion random numbers, seconds
// of start-up, all of them overwritten. Like at::NoGradGuard, a scope on this thread. And such
// a model's parameters can be given their memory on the GPU without a copy, for the
// checkpoint to go there straight.

#include <c10/core/Device.h>
#include <torch/nn/module.h>

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

/// Gives every parameter of `module` new, uninitialized memory on `device`, copying nothing
/// (module.to(device) would copy the values there): for a model built inside a
/// SkipInitialization whose checkpoint is then copied straight to the device, so that the host
/// never holds its weights. Parameters shared between modules (tied embeddings) stay shared;
/// buffers are left where they are (module.to(device) moves them afterwards).
void allocate_parameters_on(torch::nn::Module& module, const c10::Device& device);

}  // namespace nmt::model
