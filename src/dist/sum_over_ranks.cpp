#include "dist/sum_over_ranks.h"

#include <ATen/ATen.h>

#include "dist/process_group.h"

namespace nmt::dist {

void sum_over_ranks(Communicator* comm, const std::vector<SummedField>& fields) {
  if (!comm || fields.empty()) return;
  std::vector<double> packed;
  packed.reserve(fields.size());
  for (const SummedField& f : fields) packed.push_back(f.get());
  at::Tensor sums = at::tensor(packed, at::kDouble);
  comm->all_reduce_sum_host(sums);
  const auto summed = sums.accessor<double, 1>();
  for (size_t i = 0; i < fields.size(); ++i) fields[i].set(summed[static_cast<int64_t>(i)]);
}

std::vector<double> own_slot(int64_t rank, int64_t world_size, double mine) {
  std::vector<double> slots(static_cast<size_t>(world_size), 0.0);
  slots.at(static_cast<size_t>(rank)) = mine;
  return slots;
}

void append_fields(std::vector<SummedField>& fields, std::vector<double>& values) {
  fields.insert(fields.end(), values.begin(), values.end());
}

}  // namespace nmt::dist
