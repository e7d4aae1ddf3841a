#include "model/recompute.h"

#include <algorithm>
#include <mutex>
#include <utility>

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include "util/error.h"

namespace nmt::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

/// A generator and a state of it, to return to.
struct GeneratorState {
  at::Generator generator;
  at::Tensor state;
};

/// The generator's state, read under its lock as torch.get_rng_state does.
at::Tensor state_of(at::Generator& generator) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get_state();
}

/// Sets the generator's state under its lock.
void set_state(at::Generator& generator, const at::Tensor& state) {
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

/// The devices whose default generators fn may draw from: the CPU (our CPU dropout draws its
/// seed there whatever the tensors' device) and each other device an input lives on.
std::vector<at::Device> devices_of(const std::vector<at::Tensor>& inputs) {
  std::vector<at::Device> devices{at::Device(at::kCPU)};
  for (const at::Tensor& t : inputs) {
    if (!t.defined() || t.is_cpu()) continue;
    if (std::find(devices.begin(), devices.end(), t.device()) == devices.end())
      devices.push_back(t.device());
  }
  return devices;
}

/// The current states of the devices' default generators.
std::vector<GeneratorState> capture_generators(const std::vector<at::Device>& devices) {
  std::vector<GeneratorState> states;
  for (const at::Device& device : devices) {
    at::Generator generator = at::globalContext().defaultGenerator(device);
    at::Tensor state = state_of(generator);
    states.push_back({std::move(generator), std::move(state)});
  }
  return states;
}

/// Sets the generators to the saved states and, on leaving, back to the states it found, so
/// the recompute replays the forward's draws and the backward consumes none.
class GeneratorReplay {
 public:
  explicit GeneratorReplay(std::vector<GeneratorState> saved) {
    for (GeneratorState& s : saved) {
      found_.push_back({s.generator, state_of(s.generator)});
      set_state(s.generator, s.state);
    }
  }
  ~GeneratorReplay() {
    for (GeneratorState& s : found_) set_state(s.generator, s.state);
  }
  GeneratorReplay(const GeneratorReplay&) = delete;
  GeneratorReplay& operator=(const GeneratorReplay&) = delete;

 private:
  std::vector<GeneratorState> found_;
};

/// Whether autocast is on for a device type, and its dtype.
struct AutocastState {
  c10::DeviceType device_type;
  bool enabled;
  c10::ScalarType dtype;
};

/// The current autocast state of each device's type.
std::vector<AutocastState> capture_autocast(const std::vector<at::Device>& devices) {
  std::vector<AutocastState> states;
  for (const at::Device& device : devices) {
    const c10::DeviceType type = device.type();
    states.push_back(
        {type, at::autocast::is_autocast_enabled(type), at::autocast::get_autocast_dtype(type)});
  }
  return states;
}

/// Puts autocast in the given states and turns its cast cache off, restoring both on leaving.
/// The cache is off in both runs: a block reads each weight once, so it saves nothing here,
/// and a cast cached by the no-grad forward would hand the recompute a weight without
/// gradient.
class AutocastReplay {
 public:
  explicit AutocastReplay(const std::vector<AutocastState>& states)
      : cache_enabled_(at::autocast::is_autocast_cache_enabled()) {
    at::autocast::set_autocast_cache_enabled(false);
    for (const AutocastState& s : states) {
      found_.push_back(capture_autocast({at::Device(s.device_type)}).front());
      at::autocast::set_autocast_enabled(s.device_type, s.enabled);
      at::autocast::set_autocast_dtype(s.device_type, s.dtype);
    }
  }
  ~AutocastReplay() {
    for (const AutocastState& s : found_) {
      at::autocast::set_autocast_enabled(s.device_type, s.enabled);
      at::autocast::set_autocast_dtype(s.device_type, s.dtype);
    }
    at::autocast::set_autocast_cache_enabled(cache_enabled_);
  }
  AutocastReplay(const AutocastReplay&) = delete;
  AutocastReplay& operator=(const AutocastReplay&) = delete;

 private:
  bool cache_enabled_;
  std::vector<AutocastState> found_;
};

/// What backward needs to run the forward again; a capsule in the autograd context.
struct Replay : torch::CustomClassHolder {
  RecomputeFn fn;
  std::vector<GeneratorState> generators;  ///< as the forward found them
  std::vector<AutocastState> autocast;     ///< as the forward found it
  size_t num_inputs = 0;
};

/// Detached copies of the inputs that take gradients as the originals do: the roots of the
/// recompute's graph, cut from the outer one.
std::vector<at::Tensor> detached(const variable_list& saved, size_t count) {
  std::vector<at::Tensor> inputs;
  for (size_t i = 0; i < count; ++i) {
    const at::Tensor& t = saved[i];
    inputs.push_back(t.detach().requires_grad_(t.requires_grad()));
  }
  return inputs;
}

/// The autograd node: forward runs fn without a graph, backward runs it again with one.
class RecomputeFunction : public torch::autograd::Function<RecomputeFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const c10::intrusive_ptr<Replay>& replay,
                            at::TensorList inputs, at::TensorList params) {
    const std::vector<at::Tensor> in = inputs.vec();
    const std::vector<at::Device> devices = devices_of(in);
    replay->generators = capture_generators(devices);
    replay->autocast = capture_autocast(devices);
    replay->num_inputs = in.size();
    at::Tensor out;
    {
      AutocastReplay autocast(replay->autocast);
      out = replay->fn(in);
    }
    std::vector<at::Tensor> saved = in;
    saved.insert(saved.end(), params.begin(), params.end());
    ctx->save_for_backward(saved);
    ctx->saved_data["replay"] = at::IValue::make_capsule(replay);
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    // Grad mode is on in a backward only with create_graph: the gradients below would not be
    // differentiable (torch.utils.checkpoint's reentrant scheme has the same limit).
    NMT_CHECK(!at::GradMode::is_enabled(), nmt::Error,
              "activation checkpointing: expected a backward without create_graph (gradients "
              "of gradients), found create_graph");
    auto replay = c10::static_intrusive_pointer_cast<Replay>(ctx->saved_data["replay"].toCapsule());
    const variable_list saved = ctx->get_saved_variables();
    const std::vector<at::Tensor> inputs = detached(saved, replay->num_inputs);
    at::Tensor out;
    {
      GeneratorReplay generators(replay->generators);
      AutocastReplay autocast(replay->autocast);
      at::AutoGradMode grad_mode(true);
      out = replay->fn(inputs);
    }
    // Gradients wanted: the inputs' and the params' that take one. torch::autograd::grad, not
    // backward: it neither writes .grad nor runs the params' accumulators, which the outer
    // backward runs once with what this node returns for them.
    variable_list wanted;
    std::vector<size_t> slots;  // where each wanted gradient goes among this node's inputs
    for (size_t i = 0; i < saved.size(); ++i) {
      const at::Tensor& t = i < inputs.size() ? inputs[i] : saved[i];
      if (!t.requires_grad()) continue;
      wanted.push_back(t);
      slots.push_back(i);
    }
    variable_list result(1 + saved.size());  // slot 0: the Replay argument
    if (wanted.empty() || !out.requires_grad()) return result;
    const variable_list grads = torch::autograd::grad({out}, wanted, {grad_outputs[0]},
                                                      /*retain_graph=*/false,
                                                      /*create_graph=*/false,
                                                      /*allow_unused=*/true);
    for (size_t k = 0; k < grads.size(); ++k) result[1 + slots[k]] = grads[k];
    return result;
  }
};

}  // namespace

at::Tensor recompute_in_backward(RecomputeFn fn, std::vector<at::Tensor> inputs,
                                 std::vector<at::Tensor> params) {
  NMT_CHECK(at::GradMode::is_enabled(), nmt::Error,
            "recompute_in_backward: expected grad mode on (there is no backward to recompute "
            "for), found it off");
  auto replay = c10::make_intrusive<Replay>();
  replay->fn = std::move(fn);
  return RecomputeFunction::apply(replay, at::TensorList(inputs), at::TensorList(params));
}

}  // namespace nmt::model
