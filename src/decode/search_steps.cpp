#include "decode/search_steps.h"

#include <limits>
#include <utility>

#include <ATen/ATen.h>

#include "model/log_softmax_rows.h"

namespace nmt::decode {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

}  // namespace

ModelStepper::ModelStepper(model::TransformerImpl& model, model::EncoderOutput encoded, bool cached,
                           int64_t rows_per_source)
    : model_(model), cached_(cached) {
  if (cached_) {
    state_ = model_.init_state(encoded, rows_per_source);
    return;
  }
  encoded_ = std::move(encoded);
  if (rows_per_source > 1) {
    const at::Tensor expand =
        at::arange(encoded_.out.size(0),
                   at::TensorOptions().dtype(at::kLong).device(encoded_.out.device()))
            .repeat_interleave(rows_per_source);
    encoded_.out = encoded_.out.index_select(0, expand);
    encoded_.src_pad_mask = encoded_.src_pad_mask.index_select(0, expand);
  }
  prefix_ = at::empty({encoded_.out.size(0), 0},
                      at::TensorOptions().dtype(at::kLong).device(encoded_.out.device()));
}

at::Tensor ModelStepper::step(const at::Tensor& last_tokens, bool normalized) {
  at::Tensor logits;
  if (cached_) {
    logits = model_.decode_step(last_tokens, state_);
  } else {
    prefix_ = at::cat({prefix_, last_tokens.unsqueeze(1)}, 1);
    logits = model_.decode(prefix_, encoded_).select(1, -1);
  }
  if (!normalized) return logits.to(at::kFloat);
  if (logits.scalar_type() != at::kFloat || !logits.is_contiguous())
    return logits.to(at::kFloat).log_softmax(-1);
  // In place: the logits are this step's own tensor. A second [rows, vocab] buffer every step
  // is a fresh multi-megabyte allocation, paid in page faults (docs/performance-log.md).
  if (logits.is_cpu() && logits.dim() == 2) {
    model::log_softmax_rows_(logits);
    return logits;
  }
  return at::_log_softmax_out(logits, logits, /*dim=*/-1, /*half_to_float=*/false);
}

void ModelStepper::reorder(const at::Tensor& rows, const at::Tensor& sources) {
  if (cached_ && !sources.defined()) {
    model_.reorder_target_state(state_, rows);
  } else if (cached_) {
    model_.reorder_state(state_, rows, sources);
  } else {
    // Uncached rows hold their own copy of the encoder output.
    if (sources.defined()) {
      encoded_.out = encoded_.out.index_select(0, rows);
      encoded_.src_pad_mask = encoded_.src_pad_mask.index_select(0, rows);
    }
    prefix_ = prefix_.index_select(0, rows);
  }
}

Stepper::Stepper(const Ensemble& models, const at::Tensor& src_ids, bool cached,
                 int64_t rows_per_source)
    : weights_(models.weights()) {
  members_.reserve(models.size());
  for (size_t i = 0; i < models.size(); ++i)
    members_.emplace_back(models.model(i), models.model(i).encode(src_ids), cached,
                          rows_per_source);
}

at::Tensor Stepper::step(const at::Tensor& last_tokens, bool normalized) {
  if (members_.size() == 1) return members_[0].step(last_tokens, normalized);
  // Each member's log-softmax is a fresh tensor: scaled and summed in place.
  at::Tensor mean = members_[0].step(last_tokens).mul_(weights_[0]);
  for (size_t i = 1; i < members_.size(); ++i)
    mean.add_(members_[i].step(last_tokens), weights_[i]);
  return mean;
}

void Stepper::reorder(const at::Tensor& rows, const at::Tensor& sources) {
  for (ModelStepper& member : members_) member.reorder(rows, sources);
}

std::vector<int64_t> output_limits(const at::Tensor& src_ids, int64_t pad,
                                   const SearchOptions& options, int64_t max_positions) {
  const at::Tensor lengths = src_ids.ne(pad).sum(1).to(at::kCPU, at::kLong).contiguous();
  std::vector<int64_t> limits(lengths.size(0));
  const int64_t* data = lengths.data_ptr<int64_t>();
  for (size_t i = 0; i < limits.size(); ++i)
    limits[i] = max_output_length(data[i], options, max_positions);
  return limits;
}

at::Tensor long_tensor(const std::vector<int64_t>& values, const at::Device& device) {
  return at::tensor(values, at::TensorOptions().dtype(at::kLong)).to(device);
}

std::vector<int64_t> rows_kept_in_place(const std::vector<bool>& kept) {
  std::vector<int64_t> order;
  for (size_t r = 0; r < kept.size(); ++r)
    if (kept[r]) order.push_back(static_cast<int64_t>(r));
  // order now lists the kept rows in turn; the last ones, past the new end, fill the gaps.
  const auto count = static_cast<int64_t>(order.size());
  std::vector<int64_t> in_place(order.size(), -1);
  std::vector<int64_t> movers;
  for (int64_t row : order) {
    if (row < count) {
      in_place[row] = row;
    } else {
      movers.push_back(row);
    }
  }
  size_t next = 0;
  for (int64_t& row : in_place)
    if (row < 0) row = movers[next++];
  return in_place;
}

std::vector<size_t> extensions_in_parent_rows(const std::vector<int64_t>& parents) {
  const size_t beam = parents.size();
  std::vector<size_t> held(beam, beam);  // beam: not yet given an extension
  std::vector<size_t> others;
  for (size_t e = 0; e < beam; ++e) {
    TORCH_CHECK(parents[e] >= 0 && static_cast<size_t>(parents[e]) < beam,
                "extensions_in_parent_rows: parent ", parents[e], " outside 0 to ", beam - 1);
    size_t& row = held[static_cast<size_t>(parents[e])];
    if (row == beam) {
      row = e;
    } else {
      others.push_back(e);
    }
  }
  size_t next = 0;
  for (size_t& row : held)
    if (row == beam) row = others[next++];
  return held;
}

void constrain(at::Tensor& lprobs, const SearchIds& ids, const std::vector<int64_t>& row_limit,
               int64_t step) {
  if (step < static_cast<int64_t>(ids.forced_prefix.size())) {
    lprobs.fill_(kNegInf);
    lprobs.select(1, ids.forced_prefix[static_cast<size_t>(step)]).fill_(0.0);
    return;
  }
  lprobs.select(1, ids.pad).fill_(kNegInf);
  lprobs.select(1, ids.bos).fill_(kNegInf);
  std::vector<int64_t> forced;
  for (size_t r = 0; r < row_limit.size(); ++r)
    if (step >= row_limit[r]) forced.push_back(static_cast<int64_t>(r));
  if (forced.empty()) return;
  const at::Tensor rows = long_tensor(forced, lprobs.device());
  at::Tensor eos = lprobs.index_select(0, rows).select(1, ids.eos).clone();
  lprobs.index_fill_(0, rows, kNegInf);
  lprobs.select(1, ids.eos).index_copy_(0, rows, eos);
}

void check_input(const at::Tensor& src_ids, const SearchIds& ids, const SearchOptions& options) {
  validate(options);
  TORCH_CHECK(src_ids.dim() == 2 && src_ids.scalar_type() == at::kLong,
              "search: expected src_ids int64 [B, S], found ", src_ids.scalar_type(), " ",
              src_ids.sizes());
  TORCH_CHECK(ids.bos != ids.eos && ids.pad != ids.eos,
              "search: BOS, EOS and pad must differ (bos ", ids.bos, ", eos ", ids.eos, ", pad ",
              ids.pad, ")");
  for (int64_t token : ids.forced_prefix)
    TORCH_CHECK(token != ids.eos && token != ids.pad && token != ids.bos,
                "search: a forced token (", token, ") is BOS, EOS or pad");
}

}  // namespace nmt::decode
