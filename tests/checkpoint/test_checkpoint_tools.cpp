// What nmt-ckpt computes: parameter count and hash, diff semantics, averaging.
#include "catch_torch.h"
#include "skip.h"

#include <limits>

#include "checkpoint/checkpoint_tools.h"
#include "checkpoint_fixture.h"
#include "test_support.h"
#include "util/error.h"

using Catch::Matchers::Contains;
using nmt::checkpoint::CheckpointData;
using nmt::checkpoint::diff_checkpoints;
using nmt::checkpoint::model_parameter_hash;
using nmt::checkpoint::save_checkpoint;
using nmt::test::TempDir;

namespace {

CheckpointData with_model(std::vector<std::pair<std::string, at::Tensor>> tensors) {
  CheckpointData data;
  data.tensors = std::move(tensors);
  return data;
}

}  // namespace

TEST_CASE("parameter count and hash cover model.* tensors, in name order", "[checkpoint]") {
  const at::Tensor w = at::arange(6, at::kFloat).reshape({2, 3});
  const at::Tensor b = at::ones({3}, at::kHalf);
  const CheckpointData one = with_model({{"model.w", w}, {"model.b", b}, {"opt.m", w}});
  const CheckpointData reordered = with_model({{"model.b", b}, {"opt.m", w.neg()}, {"model.w", w}});
  CHECK(nmt::checkpoint::model_parameter_count(one) == 9);
  CHECK(model_parameter_hash(one) == model_parameter_hash(reordered));
  // Values, names, shapes and dtypes all count.
  CHECK(model_parameter_hash(one) !=
        model_parameter_hash(with_model({{"model.w", w.add(1e-3)}, {"model.b", b}})));
  CHECK(model_parameter_hash(one) !=
        model_parameter_hash(with_model({{"model.w2", w}, {"model.b", b}})));
  CHECK(model_parameter_hash(one) !=
        model_parameter_hash(with_model({{"model.w", w.reshape({3, 2})}, {"model.b", b}})));
  CHECK(model_parameter_hash(one) !=
        model_parameter_hash(with_model({{"model.w", w}, {"model.b", b.to(at::kBFloat16)}})));
}

TEST_CASE("diff compares in float64, NaN meets NaN, inf meets inf", "[checkpoint]") {
  TempDir dir;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  const auto a = dir.path() / "a.safetensors";
  const auto b = dir.path() / "b.safetensors";
  save_checkpoint(a, with_model({{"model.x", at::tensor({1.0, nan, inf, -inf, 0.0})},
                                 {"model.y", at::tensor({1.0, 2.0})},
                                 {"model.tiny", at::tensor({1.0})}}));
  save_checkpoint(b, with_model({{"model.x", at::tensor({1.0, nan, inf, -inf, -0.0})},
                                 {"model.y", at::tensor({1.0, nan})},
                                 {"model.tiny", at::tensor({1.0 + 1e-12})}}));
  const auto report = diff_checkpoints(a, b, {});
  CHECK_FALSE(report.same);
  CHECK_THAT(report.json, Contains("\"model.x\": 0,"));
  CHECK_THAT(report.json, Contains("\"model.y\": \"inf\","));  // NaN against a number
  CHECK_THAT(report.json, Contains("\"model.tiny\": 1.000088900582341e-12"));
  CHECK_THAT(report.json, Contains("\"max_abs_diff\": \"inf\","));
  CHECK(diff_checkpoints(a, a, {}).same);
  CHECK_THROWS_AS(diff_checkpoints(a, a, {-1.0, false}), nmt::CheckpointError);

  // A dtype difference is a mismatch even where the values agree.
  const auto c = dir.path() / "c.safetensors";
  save_checkpoint(c, with_model({{"model.x", at::tensor({1.0, nan, inf, -inf, 0.0}).to(at::kFloat)},
                                 {"model.y", at::tensor({1.0, 2.0})},
                                 {"model.tiny", at::tensor({1.0})}}));
  const auto dtype = diff_checkpoints(a, c, {});
  CHECK_FALSE(dtype.same);
  CHECK_THAT(dtype.json, Contains("\"model.x: dtype F64 in a, F32 in b\""));
  CHECK_THAT(dtype.json, Contains("\"max_abs_diff\": 0,"));
}

TEST_CASE("average: float64 mean per dtype, mismatches name tensor and file", "[checkpoint]") {
  TempDir dir;
  const auto save = [&](const std::string& name, const CheckpointData& data) {
    const auto file = dir.path() / name;
    save_checkpoint(file, data);
    return file;
  };
  const auto a = save("a.safetensors", with_model({{"model.h", at::full({3}, 1.0).to(at::kHalf)},
                                                   {"model.mask", at::ones({2}, at::kBool)},
                                                   {"opt.v", at::ones({1})}}));
  const auto b = save("b.safetensors", with_model({{"model.mask", at::ones({2}, at::kBool)},
                                                   {"model.h", at::full({3}, 2.0).to(at::kHalf)}}));
  const CheckpointData avg = nmt::checkpoint::average_checkpoints({a, b});
  REQUIRE(avg.tensors.size() == 2);
  CHECK(avg.tensors[0].first == "model.h");  // the first input's order
  CHECK(avg.at("model.h").scalar_type() == at::kHalf);
  CHECK(avg.at("model.h").to(at::kFloat).equal(at::full({3}, 1.5f)));
  CHECK(avg.at("model.mask").equal(at::ones({2}, at::kBool)));
  CHECK(avg.meta("averaged_from") == a.string() + "," + b.string());

  const auto missing =
      save("missing.safetensors", with_model({{"model.h", at::ones({3}).to(at::kHalf)},
                                              {"model.other", at::ones({2}, at::kBool)}}));
  CHECK_THROWS_WITH(
      nmt::checkpoint::average_checkpoints({a, missing}),
      missing.string() + ": no tensor \"model.mask\" (present in " + a.string() + ")");
  const auto dtype =
      save("dtype.safetensors",
           with_model({{"model.h", at::ones({3})}, {"model.mask", at::ones({2}, at::kBool)}}));
  CHECK_THROWS_WITH(nmt::checkpoint::average_checkpoints({a, dtype}),
                    Contains("tensor \"model.h\" has dtype F32, but F16 in"));
  const auto extra = save("extra.safetensors", with_model({{"model.h", at::ones({3}).to(at::kHalf)},
                                                           {"model.mask", at::ones({2}, at::kBool)},
                                                           {"model.more", at::ones({1})}}));
  CHECK_THROWS_WITH(nmt::checkpoint::average_checkpoints({a, extra}),
                    Contains("3 model.* tensors, but " + a.string() + " has 2"));
  const auto none = save("none.safetensors", with_model({{"opt.v", at::ones({1})}}));
  CHECK_THROWS_WITH(nmt::checkpoint::average_checkpoints({none}),
                    none.string() + ": no model.* tensors to average");
  CHECK_THROWS_AS(nmt::checkpoint::average_checkpoints({}), nmt::CheckpointError);
}

TEST_CASE("info and diff print valid JSON (checked by Python's json)", "[checkpoint][python]") {
  const std::string python = NMT_PYTHON;
  if (python.empty() || !std::filesystem::exists(python)) {
    NMT_SKIP("no venv python (NMT_PYTHON='" << python << "'): the JSON check");
  }
  TempDir dir;
  const auto a = dir.path() / "a \"quoted\".safetensors";
  save_checkpoint(
      a, with_model({{"model.x", at::tensor({1.0, std::numeric_limits<double>::quiet_NaN()})},
                     {"model.\xE6\x97\xA5", at::zeros({0})}}));
  CheckpointData b_data = with_model({{"model.x", at::tensor({2.0, 0.0})}});
  b_data.metadata = {{"step", "12"}, {"epoch", "x1"}, {"note", "tab\there"}};
  const auto b = dir.path() / "b.safetensors";
  save_checkpoint(b, b_data);
  const auto check = [&](const std::string& name, const std::string& text,
                         const std::string& expr) {
    const auto file = dir.write(name, text);
    const auto r = nmt::test::run_command(
        "'" + python + "' -c 'import json,sys; d=json.load(open(sys.argv[1])); print(" + expr +
        ")' " + file.string());
    INFO(text << r.err);
    CHECK(r.exit_code == 0);
    return r.out;
  };
  CHECK(check("info_a.json", nmt::checkpoint::checkpoint_info_json(a),
              "d[\"path\"], d[\"step\"], d[\"parameters\"]") == a.string() + " None 2\n");
  CHECK(check("info_b.json", nmt::checkpoint::checkpoint_info_json(b),
              "d[\"step\"], d[\"epoch\"], d[\"metadata\"][\"note\"]") == "12 x1 tab\there\n");
  CHECK(check("diff.json", diff_checkpoints(a, b, {}).json,
              "d[\"tensors\"][\"model.x\"], d[\"same\"], len(d[\"mismatches\"])") ==
        "inf False 1\n");
}
