#include "checkpoint/checkpoint_tools.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <system_error>

#include <ATen/core/grad_mode.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "checkpoint/xxhash64.h"
#include "util/error.h"
#include "util/json_text.h"
#include "util/shape.h"

namespace nmt::checkpoint {
namespace {

bool is_model_tensor(std::string_view name) { return in_group(TensorGroup::kModel, name); }

/// A JSON number for a double; infinities (JSON has none) become the strings "inf"/"-inf".
std::string json_number(double value) {
  if (std::isnan(value)) return "\"nan\"";
  if (std::isinf(value)) return value > 0 ? "\"inf\"" : "\"-inf\"";
  return fmt::format("{}", value);
}

/// A metadata value as JSON: an integer when it is one, else a string; null when absent.
std::string metadata_json(const CheckpointData& data, const std::string& key, bool integer) {
  const auto it = data.metadata.find(key);
  if (it == data.metadata.end()) return "null";
  if (integer) {
    const std::string& text = it->second;
    int64_t value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (!text.empty() && error == std::errc() && end == text.data() + text.size())
      return std::to_string(value);
  }
  return json::quote(it->second);
}

/// Largest |a - b| in float64. Equal values (infinities included) and NaN against NaN count
/// as no difference; NaN against a number as an infinite one.
double max_abs_difference(const at::Tensor& a, const at::Tensor& b) {
  if (a.numel() == 0) return 0;
  const at::Tensor da = a.to(c10::ScalarType::Double);
  const at::Tensor db = b.to(c10::ScalarType::Double);
  const at::Tensor same = da.eq(db).logical_or(da.isnan().logical_and(db.isnan()));
  const double inf = std::numeric_limits<double>::infinity();
  return da.sub(db).abs_().masked_fill_(same, 0.0).nan_to_num_(inf, inf).max().item<double>();
}

/// The tensors a comparison or average looks at.
NamedTensors selected(const CheckpointData& data, bool all_tensors,
                      TensorGroup group = TensorGroup::kModel) {
  NamedTensors out;
  for (const auto& entry : data.tensors) {
    if (all_tensors || in_group(group, entry.first)) out.push_back(entry);
  }
  return out;
}

}  // namespace

int64_t model_parameter_count(const CheckpointData& data) {
  int64_t count = 0;
  for (const auto& [name, tensor] : data.tensors) {
    if (is_model_tensor(name)) count += tensor.numel();
  }
  return count;
}

uint64_t model_parameter_hash(const CheckpointData& data) {
  std::vector<const std::pair<std::string, at::Tensor>*> model;
  for (const auto& entry : data.tensors) {
    if (is_model_tensor(entry.first)) model.push_back(&entry);
  }
  std::sort(model.begin(), model.end(),
            [](const auto* a, const auto* b) { return a->first < b->first; });
  XxHash64 hash;
  for (const auto* entry : model) {
    const at::Tensor tensor = entry->second.contiguous();
    hash.update(entry->first);
    hash.update("\0", 1);
    hash.update(safetensors_dtype_name(tensor));
    const int64_t rank = tensor.dim();
    hash.update(&rank, sizeof(rank));
    hash.update(tensor.sizes().data(), tensor.sizes().size() * sizeof(int64_t));
    if (tensor.nbytes() > 0) hash.update(tensor.const_data_ptr(), tensor.nbytes());
  }
  return hash.digest();
}

std::string checkpoint_info_json(const std::filesystem::path& file) {
  const CheckpointData data = map_checkpoint(file);  // views of the file: no copy held
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(file, ec);
  NMT_CHECK(!ec, CheckpointError, "{}: cannot stat: {}", file.string(), ec.message());
  std::string out = "{\n";
  out += fmt::format("  \"path\": {},\n", json::quote(file.string()));
  out += fmt::format("  \"step\": {},\n", metadata_json(data, "step", true));
  out += fmt::format("  \"epoch\": {},\n", metadata_json(data, "epoch", true));
  out += fmt::format("  \"config_hash\": {},\n", metadata_json(data, "config_hash", false));
  out += fmt::format("  \"parameters\": {},\n", model_parameter_count(data));
  out += fmt::format("  \"parameter_hash\": \"{}\",\n", hex64(model_parameter_hash(data)));
  out += fmt::format("  \"tensors\": {},\n", data.tensors.size());
  out += fmt::format("  \"bytes\": {},\n", bytes);
  out += "  \"metadata\": {";
  bool first = true;
  for (const auto& [key, value] : data.metadata) {
    out += first ? "\n    " : ",\n    ";
    first = false;
    out += json::quote(key) + ": " + json::quote(value);
  }
  out += first ? "}\n}\n" : "\n  }\n}\n";
  return out;
}

DiffReport diff_checkpoints(const std::filesystem::path& a_file,
                            const std::filesystem::path& b_file, const DiffOptions& options) {
  NMT_CHECK(options.atol >= 0 && !std::isnan(options.atol), CheckpointError,
            "--atol: expected a number >= 0, found {}", options.atol);
  at::NoGradGuard no_grad;
  // Views of the files mapped: two large checkpoints are compared without a copy of either.
  const CheckpointData a_data = map_checkpoint(a_file);
  const CheckpointData b_data = map_checkpoint(b_file);
  const auto a = selected(a_data, options.all_tensors);
  const auto b = selected(b_data, options.all_tensors);

  std::vector<std::string> mismatches;
  std::vector<std::pair<std::string, double>> differences;
  double overall = 0;
  for (const auto& [name, tensor] : a) {
    const at::Tensor* other = b_data.find(name);
    if (!other) {
      mismatches.push_back(fmt::format("{}: only in a", name));
      continue;
    }
    if (!tensor.sizes().equals(other->sizes())) {
      mismatches.push_back(fmt::format("{}: shape {} in a, {} in b", name, shape_string(tensor.sizes()),
                                       shape_string(other->sizes())));
      continue;
    }
    if (tensor.scalar_type() != other->scalar_type()) {
      mismatches.push_back(fmt::format("{}: dtype {} in a, {} in b", name,
                                       safetensors_dtype_name(tensor),
                                       safetensors_dtype_name(*other)));
    }
    const double difference = max_abs_difference(tensor, *other);
    differences.emplace_back(name, difference);
    overall = std::max(overall, difference);
  }
  for (const auto& entry : b) {
    if (!a_data.find(entry.first)) mismatches.push_back(fmt::format("{}: only in b", entry.first));
  }

  DiffReport report;
  report.same = mismatches.empty() && overall <= options.atol;
  std::string& out = report.json;
  out = "{\n";
  out += fmt::format("  \"a\": {},\n", json::quote(a_file.string()));
  out += fmt::format("  \"b\": {},\n", json::quote(b_file.string()));
  out += fmt::format("  \"compared\": \"{}\",\n", options.all_tensors ? "all" : "model.*");
  out += fmt::format("  \"atol\": {},\n", json_number(options.atol));
  out += "  \"tensors\": {";
  for (size_t i = 0; i < differences.size(); ++i) {
    out += i == 0 ? "\n    " : ",\n    ";
    out += json::quote(differences[i].first) + ": " + json_number(differences[i].second);
  }
  out += differences.empty() ? "},\n" : "\n  },\n";
  out += fmt::format("  \"max_abs_diff\": {},\n", json_number(overall));
  out += "  \"mismatches\": [";
  for (size_t i = 0; i < mismatches.size(); ++i) {
    out += i == 0 ? "\n    " : ",\n    ";
    out += json::quote(mismatches[i]);
  }
  out += mismatches.empty() ? "],\n" : "\n  ],\n";
  out += fmt::format("  \"same\": {}\n}}\n", report.same ? "true" : "false");
  return report;
}

CheckpointData average_checkpoints(const std::vector<std::filesystem::path>& inputs,
                                   TensorGroup group) {
  const std::string_view prefix = group_prefix(group);
  NMT_CHECK(!inputs.empty(), CheckpointError, "average: no input checkpoints");
  at::NoGradGuard no_grad;
  // One input in memory at a time (plus the float64 sums), so averaging many checkpoints of
  // a large model needs no more memory than two of them.
  NamedTensors reference;  // the first input's tensors
  std::vector<at::Tensor> sums;  // float64 running sums; undefined for integer tensors
  CheckpointData last;
  for (size_t i = 0; i < inputs.size(); ++i) {
    // The other groups (the optimizer's state is twice the parameters) are hashed, not held.
    CheckpointData data = load_checkpoint(
        inputs[i], [group](std::string_view name) { return in_group(group, name); });
    auto model = selected(data, false, group);
    const std::string& first = inputs[0].string();
    const std::string& current = inputs[i].string();
    if (i == 0) {
      NMT_CHECK(!model.empty(), CheckpointError, "{}: no {}* tensors to average", current, prefix);
      for (const auto& [name, tensor] : model) {
        const bool floating = c10::isFloatingType(tensor.scalar_type());
        sums.push_back(floating ? tensor.to(c10::ScalarType::Double, false, /*copy=*/true)
                                : at::Tensor());
      }
      reference = std::move(model);
    } else {
      NMT_CHECK(model.size() == reference.size(), CheckpointError,
                "{}: {} {}* tensors, but {} has {}", current, model.size(), prefix, first,
                reference.size());
      for (size_t k = 0; k < reference.size(); ++k) {
        const auto& [name, ref] = reference[k];
        const at::Tensor* tensor = data.find(name);
        NMT_CHECK(tensor, CheckpointError, "{}: no tensor {} (present in {})", current,
                  json::quote(name), first);
        NMT_CHECK(tensor->sizes().equals(ref.sizes()), CheckpointError,
                  "{}: tensor {} has shape {}, but {} in {}", current, json::quote(name),
                  shape_string(tensor->sizes()), shape_string(ref.sizes()), first);
        NMT_CHECK(tensor->scalar_type() == ref.scalar_type(), CheckpointError,
                  "{}: tensor {} has dtype {}, but {} in {}", current, json::quote(name),
                  safetensors_dtype_name(*tensor), safetensors_dtype_name(ref), first);
        if (sums[k].defined()) {
          sums[k].add_(*tensor);
        } else {
          NMT_CHECK(tensor->equal(ref), CheckpointError,
                    "{}: integer tensor {} differs from {}'s; integer tensors cannot be averaged",
                    current, json::quote(name), first);
        }
      }
    }
    if (i + 1 == inputs.size()) last = std::move(data);
  }

  CheckpointData out;
  out.metadata = std::move(last.metadata);
  std::vector<std::string> names;
  for (const auto& input : inputs) names.push_back(input.string());
  out.metadata["averaged_from"] = fmt::format("{}", fmt::join(names, ","));
  const double count = static_cast<double>(inputs.size());
  for (size_t k = 0; k < reference.size(); ++k) {
    const auto& [name, ref] = reference[k];
    out.tensors.emplace_back(name,
                             sums[k].defined() ? sums[k].div_(count).to(ref.scalar_type()) : ref);
  }
  return out;
}

}  // namespace nmt::checkpoint
