#pragma once
// Checkpoints written before the fused attention projections (nmt-train up to 7b6366d) hold
// separate [d, d] q_proj, k_proj and v_proj tensors in every attention block; the model now has
// one [3d, d] qkv_proj for self-attention and a [2d, d] kv_proj next to q_proj for
// cross-attention (tensor_layout.h, attention_projection). load_checkpoint fuses old tensors
// here, the one place that knows the old layout, so that everything reading a checkpoint
// (resume, fine-tuning, nmt-translate, nmt-ckpt diff and average) sees the new one.
//
// The fusion concatenates rows, which is exact, in every group named by module path: the
// parameters (model.), their moving average (ema.) and the optimizer's per-parameter slots
// (optim.<slot>.): Adam's moments are elementwise, so the fused moment is the concatenation;
// the per-parameter step count (a 0-dim tensor, equal for the parts) is taken once.

#include "checkpoint/tensor_layout.h"

namespace nmt::checkpoint {

/// Fuses legacy attention tensors of `tensors` in place, keeping the order: the fused tensor
/// takes the place of its first part (self: q_proj, cross: k_proj). Returns how many tensors
/// were fused away (0 for a checkpoint of the current layout). Throws CheckpointError naming
/// `where` and the tensor when a part is missing or the parts' shapes disagree.
int64_t fuse_legacy_attention(NamedTensors& tensors, const std::string& where);

}  // namespace nmt::checkpoint
