#pragma once
// A linear layer's weight prepacked for CPU float32 inference. at::linear hands every product
// to MKL's sgemm, which copies the weight into its blocked panel layout on every call: for the
// few rows of a decoding step that copy costs as much as the arithmetic (11% of a greedy step
// in the 2026-12-06 profile). oneDNN can keep the weight in its blocked layout once, and its
// inner product then reads it as it is (LibTorch's own weight prepacking for frozen CPU
// models, the mkldnn::_reorder_linear_weight and mkldnn::_linear_pointwise ops).
//
// The packed copy is made from the weight's values at pack time: a PackedWeight is used only
// while its weight's version counter is the one it was packed at (an in-place update, such as
// an optimizer step or a load, makes it stale), in float32 on the CPU without autograd, and
// otherwise at::linear computes as before. Sums are blocked otherwise than MKL's: results
// agree with at::linear to float rounding, not bit for bit.

#include <cstdint>

#include <ATen/core/Tensor.h>

namespace nmt::model {

/// Whether this LibTorch has oneDNN's prepacked linear ops (CPU builds with MKL-DNN).
bool weight_packing_available();

/// The smallest weight (elements) that pack() packs by default. oneDNN's prepacked product
/// costs about 15 us a call more than MKL's sgemm (one thread, 2-core Intel Xeon, LibTorch 2.11,
/// scripts/bench/packed_linear.py): for a small weight that is more than MKL spends copying it,
/// so the plain product is faster at few rows and within 3% at 100 to 400 (192 x 192: 6 against
/// 22 us at 4 rows, 189 against 199 at 400; 768 x 192 at 400 rows: 681 against 661), while for a
/// big one the copy dominates (512 x 1536 at 4 rows: 210 against 136 us; 192 x 8000: 486 against
/// 315 us). 512 x 512, 2^18 floats, is the border: packed 1.1x as fast at 32 to 128 rows, 0.64x at
/// 4 rows; transformer-base decodes its batches at tens to hundreds of rows, so it is packed.
constexpr int64_t kMinPackedElements = int64_t{1} << 18;

/// The smallest weight that pack() packs by default on processors other than Intel's, where
/// MKL's sgemm runs other code than on Intel's (on an AMD EPYC its kernel for AMD processors,
/// mkl_blas_def_sgemm_kernel_0_zen, in MKL 2024.2 of LibTorch 2.11) and oneDNN's runs AVX-512
/// where the processor has it: on a 2-core AMD EPYC with AVX-512 (family 26, one thread,
/// scripts/bench/packed_linear.py) oneDNN's prepacked product was 1.1x to 4.2x as fast as MKL's
/// at every shape from 192 x 576 up and every row count from 4 to 400; only 192 x 192 at 4 and 12
/// rows was faster unpacked (6 against 12 us, 12 against 15 us).
constexpr int64_t kMinPackedElementsOffIntel = int64_t{1} << 16;

/// The default of pack()'s min_elements on this processor: kMinPackedElements on Intel's (and
/// where the build cannot tell), kMinPackedElementsOffIntel on other x86-64 processors.
int64_t min_packed_elements();

/// One weight [out, in] and its prepacked copy.
class PackedWeight {
 public:
  /// Packs weight (float32, on the CPU) as it is now; afterwards empty() is false unless packing
  /// is unavailable, weight is not float32 on the CPU or it has fewer than min_elements elements
  /// (then linear() is at::linear).
  void pack(const at::Tensor& weight, int64_t min_elements = min_packed_elements());
  /// Drops the packed copy.
  void clear() { packed_ = at::Tensor(); }
  /// Whether there is no packed copy.
  bool empty() const { return !packed_.defined(); }

  /// at::linear(x, weight, bias), then at::relu when relu: with the packed copy (the ReLU
  /// fused) when it applies to these arguments (see the file comment), else unpacked.
  /// weight must be the tensor pack() was given.
  at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                    bool relu = false) const;

 private:
  /// Whether the packed copy computes at::linear(x, weight, ...) now.
  bool applies(const at::Tensor& x, const at::Tensor& weight) const;

  at::Tensor packed_;             ///< oneDNN's blocked layout of the weight; undefined: none
  int64_t version_ = 0;           ///< the weight's version counter when packed
  const void* source_ = nullptr;  ///< the weight's storage when packed
};

}  // namespace nmt::model
