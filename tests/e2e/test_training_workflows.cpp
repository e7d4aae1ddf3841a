// End-to-end: the workflows of real jobs. A job resumed on another number of ranks or
// update_freq (elastic resume), fine-tuning from another run's checkpoint (train.init_from),
// and the moving average of the parameters (train.ema_decay) through nmt-translate.
#include <catch2/catch.hpp>

#include <filesystem>

#include "train_support.h"

using Catch::Matchers::Contains;
using nmt::test::checkpoint_diff;
using nmt::test::checkpoint_path;
using nmt::test::json_number;
using nmt::test::read_file;
using nmt::test::run_command;
using nmt::test::TempDir;

namespace {

const std::string kTrain = nmt::test::kTrainBin;
const std::string kTranslate = NMT_TRANSLATE_BIN;

/// The first `lines` pairs of the shipped training data, so an epoch takes seconds.
std::pair<std::string, std::string> corpus_slice(const TempDir& dir, int lines) {
  const std::string src = (dir.path() / "slice.en").string(), tgt = (dir.path() / "slice.de").string();
  const std::string n = std::to_string(lines);
  REQUIRE(run_command("gzip -dc data/ddtp.en-de.train.en.gz | head -n " + n + " > " + src +
                      " && gzip -dc data/ddtp.en-de.train.de.gz | head -n " + n + " > " + tgt)
              .exit_code == 0);
  return {src, tgt};
}

/// Tiny-config flags on a corpus for runs that must agree bit for bit (train_support.h),
/// every checkpoint kept.
std::string flags(const std::filesystem::path& run_dir,
                  const std::pair<std::string, std::string>& corpus) {
  return nmt::test::exact_run_flags(run_dir) + " --set data.train_src=" + corpus.first +
         " --set data.train_tgt=" + corpus.second + " --set checkpoint.keep_last=100";
}

/// A run directory holding copies of `from`'s checkpoints up to `step`: a job interrupted there.
void copy_checkpoints(const std::filesystem::path& from, const std::filesystem::path& to, int step) {
  std::filesystem::create_directories(to / "checkpoints");
  for (int s = 2; s <= step; s += 2)
    std::filesystem::copy_file(checkpoint_path(from, s), checkpoint_path(to, s));
}

double summary_number(const std::filesystem::path& run_dir, const std::string& key) {
  const auto v = json_number(read_file(run_dir / "summary.json"), key);
  REQUIRE(v.has_value());
  return *v;
}

}  // namespace

TEST_CASE("a job resumed on other ranks x update_freq of the same product continues bitwise",
          "[e2e][dist]") {
  TempDir data, two, one, two_to_one, one_to_two;
  const auto corpus = corpus_slice(data, 2000);
  // Uninterrupted: 2 ranks, and 1 rank accumulating 2 batches, 8 updates each.
  auto r = run_command("timeout 300 " + kTrain + flags(two.path(), corpus) +
                       " --nproc-per-node 2 --set train.max_steps=8");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  REQUIRE(run_command(kTrain + flags(one.path(), corpus) +
                      " --set data.update_freq=2 --set train.max_steps=8")
              .exit_code == 0);
  // 2 ranks x 4 updates, then 1 rank x update_freq 2 to update 8.
  copy_checkpoints(two.path(), two_to_one.path(), 4);
  r = run_command(kTrain + flags(two_to_one.path(), corpus) +
                  " --nproc-per-node 1 --set data.update_freq=2 --set train.max_steps=8");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Contains("saved by 2 rank(s) x update_freq 1, resumed as 1 x 2: the same 2 "
                             "batches per update"));
  CHECK(checkpoint_diff(checkpoint_path(two_to_one.path(), 8), checkpoint_path(two.path(), 8), "0") == 0);
  // 1 rank x update_freq 2 for 4 updates, then 2 ranks to update 8.
  copy_checkpoints(one.path(), one_to_two.path(), 4);
  r = run_command("timeout 300 " + kTrain + flags(one_to_two.path(), corpus) +
                  " --nproc-per-node 2 --set data.update_freq=1 --set train.max_steps=8");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(checkpoint_diff(checkpoint_path(one_to_two.path(), 8), checkpoint_path(one.path(), 8), "0") == 0);
}

TEST_CASE("a run with sharded optimizer state saves and resumes as an unsharded one, bitwise",
          "[e2e][dist][sharding]") {
  // dist.sharding optimizer: each of the 2 ranks keeps Adam's moments for its share of the
  // parameters; the checkpoint gathers them under the usual names. So a sharded run's
  // checkpoints are an unsharded run's, bit for bit, and either resumes as the other.
  TempDir data, plain, sharded, sharded_to_one, plain_to_sharded;
  const auto corpus = corpus_slice(data, 2000);
  const std::string two = " --nproc-per-node 2 --set train.max_steps=8";
  const std::string shard = " --set dist.sharding=optimizer";
  auto r = run_command("timeout 300 " + kTrain + flags(plain.path(), corpus) + two);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  r = run_command("timeout 300 " + kTrain + flags(sharded.path(), corpus) + two + shard);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Contains("optimizer state sharded"));
  // Every tensor of the file (--all): the optimizer's moments too, gathered from both ranks.
  for (int step : {4, 8}) {
    const auto diff = run_command(nmt::test::kCkptBin + " diff --all " +
                                  checkpoint_path(sharded.path(), step) + " " +
                                  checkpoint_path(plain.path(), step));
    INFO(diff.out << diff.err);
    CHECK(diff.exit_code == 0);
  }
  // The sharded run's checkpoint at 4 resumed unsharded on 1 rank x update_freq 2.
  copy_checkpoints(sharded.path(), sharded_to_one.path(), 4);
  r = run_command(kTrain + flags(sharded_to_one.path(), corpus) +
                  " --nproc-per-node 1 --set data.update_freq=2 --set train.max_steps=8");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(checkpoint_diff(checkpoint_path(sharded_to_one.path(), 8), checkpoint_path(plain.path(), 8),
                        "0") == 0);
  // The unsharded run's checkpoint at 4 resumed sharded on 2 ranks.
  copy_checkpoints(plain.path(), plain_to_sharded.path(), 4);
  r = run_command("timeout 300 " + kTrain + flags(plain_to_sharded.path(), corpus) + two + shard);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(checkpoint_diff(checkpoint_path(plain_to_sharded.path(), 8),
                        checkpoint_path(plain.path(), 8), "0") == 0);
}

TEST_CASE("4 ranks resumed as 2 x 2 or 1 x 4 continue to a tolerance, not bitwise",
          "[e2e][dist]") {
  // Bitwise holds for 2 ranks <-> 1 x 2 (above): a sum of two terms is the same in either
  // order. With 4 ranks the all-reduce adds four gradients in its own order and update_freq
  // accumulates them in another, so the parameters drift by float rounding, which Adam
  // amplifies where its second moment is small. Measured on the tiny config (2 cores, AVX-512
  // Xeon): 6.9e-6 two updates after the resume, 1.2e-4 after ten, while two updates of the
  // uninterrupted run move parameters by 8.6e-4. The check: two updates on, within 1e-4.
  TempDir data, four, two_by_two, one_by_four;
  const auto corpus = corpus_slice(data, 2000);
  auto r = run_command("timeout 400 " + kTrain + flags(four.path(), corpus) +
                       " --nproc-per-node 4 --set train.max_steps=12");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  copy_checkpoints(four.path(), two_by_two.path(), 10);
  copy_checkpoints(four.path(), one_by_four.path(), 10);
  r = run_command("timeout 300 " + kTrain + flags(two_by_two.path(), corpus) +
                  " --nproc-per-node 2 --set data.update_freq=2 --set train.max_steps=12");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  r = run_command(kTrain + flags(one_by_four.path(), corpus) +
                  " --nproc-per-node 1 --set data.update_freq=4 --set train.max_steps=12");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::string four_12 = checkpoint_path(four.path(), 12);
  CHECK(checkpoint_diff(checkpoint_path(two_by_two.path(), 12), four_12, "1e-4") == 0);
  CHECK(checkpoint_diff(checkpoint_path(one_by_four.path(), 12), four_12, "1e-4") == 0);
  // The tolerance is far below what training moves: the resume is not simply close to anything.
  CHECK(checkpoint_diff(checkpoint_path(four.path(), 10), four_12, "1e-4") == 1);
}

TEST_CASE("a job resumed with another global batch trains the rest of the epoch once",
          "[e2e][dist]") {
  TempDir data, whole, part, resumed;
  const auto corpus = corpus_slice(data, 600);
  const std::string epoch = " --set train.max_steps=0 --set train.max_epochs=1";
  REQUIRE(run_command(kTrain + flags(whole.path(), corpus) + epoch).exit_code == 0);
  const double epoch_tokens = summary_number(whole.path(), "tokens");
  const double epoch_steps = summary_number(whole.path(), "final_step");
  REQUIRE(epoch_steps > 6);
  // 1 rank for 4 updates; then 2 ranks x update_freq 2 (4 batches an update) to the epoch's end.
  REQUIRE(run_command(kTrain + flags(part.path(), corpus) + " --set train.max_steps=4").exit_code == 0);
  const double first_tokens = summary_number(part.path(), "tokens");
  copy_checkpoints(part.path(), resumed.path(), 4);
  auto r = run_command("timeout 300 " + kTrain + flags(resumed.path(), corpus) + epoch +
                       " --nproc-per-node 2 --set data.update_freq=2");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Contains("the global batch changes from 1 to 4 batches per update"));
  // Every pair once: the two runs together trained exactly the tokens of one epoch.
  CHECK(first_tokens + summary_number(resumed.path(), "tokens") == epoch_tokens);
  CHECK(summary_number(resumed.path(), "epoch") == 1);
  CHECK(summary_number(resumed.path(), "final_step") < epoch_steps);
  // Checkpoints inside the epoch keep the updates trained under the old global batch; the
  // last one, at the epoch's end, is the start of epoch 2, whole again.
  const auto inside = run_command(nmt::test::kCkptBin + " info " + checkpoint_path(resumed.path(), 6));
  CHECK_THAT(inside.out, Contains("\"iterator_consumed\": \"1:4\""));
  const std::string last = read_file(resumed.path() / "summary.json");
  const auto info = run_command(nmt::test::kCkptBin + " info " +
                                nmt::test::json_string(last, "last_checkpoint").value_or(""));
  CHECK_THAT(info.out, Contains("\"iterator_consumed\": \"\""));
  CHECK_THAT(info.out, Contains("\"iterator_epoch\": \"2\""));
}

TEST_CASE("fine-tuning starts from another run's parameters and vocabulary", "[e2e]") {
  TempDir data, source, tuned, bad;
  const auto corpus = corpus_slice(data, 600);
  // The source trains its own 1000-piece vocabulary.
  const std::string base = " --config configs/tiny.yaml --set data.vocab_size=1000 --set "
                           "train.valid_every=0 --set model.dropout=0 --set data.max_tokens=1024";
  auto r = run_command(kTrain + base + " --set run_dir=" + source.path().string() +
                       " --set train.max_steps=3 --set checkpoint.every_steps=3");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  // New data, learning rate 0 for the first update: the parameters stay the source's.
  const std::string tune = base + " --set run_dir=" + tuned.path().string() + " --set data.train_src=" +
                           corpus.first + " --set data.train_tgt=" + corpus.second +
                           " --set checkpoint.every_steps=1 --init-from " + source.path().string();
  r = run_command(kTrain + tune + " --set train.max_steps=1 --set train.lr=0");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Contains("fine-tuning from " + checkpoint_path(source.path(), 3)));
  // Step count restarts: the first update is step 1.
  REQUIRE(std::filesystem::exists(checkpoint_path(tuned.path(), 1)));
  CHECK(checkpoint_diff(checkpoint_path(tuned.path(), 1), checkpoint_path(source.path(), 3), "0") == 0);
  CHECK(nmt::test::read_file(tuned.path() / "vocab" / "joint.model") ==
        nmt::test::read_file(source.path() / "vocab" / "joint.model"));
  // Resuming the fine-tuning run continues its own checkpoint; init_from plays no part.
  r = run_command(kTrain + tune + " --set train.max_steps=2");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Contains("resumed from " + checkpoint_path(tuned.path(), 1)));
  CHECK_THAT(r.err, !Contains("fine-tuning from"));
  // Another model shape: the key and both values are named.
  r = run_command(kTrain + base + " --set run_dir=" + bad.path().string() +
                  " --set model.ffn_dim=256 --set train.max_steps=1 --init-from " + source.path().string());
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.err, Contains("model.ffn_dim is 512 in the checkpoint but 256 in this run's config"));
  // Another network of the same shapes (an activation): refused too, not trained unnoticed.
  r = run_command(kTrain + base + " --set run_dir=" + bad.path().string() +
                  " --set model.activation=gelu --set train.max_steps=1 --init-from " +
                  source.path().string());
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.err, Contains("model.activation is relu in the checkpoint but gelu"));
  // Another vocabulary size: both are named.
  r = run_command(kTrain + " --config configs/tiny.yaml --set data.vocab_size=2000 --set run_dir=" +
                  bad.path().string() + " --init-from " + source.path().string());
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.err, Contains("data.vocab_size is 2000 but train.init_from"));
  CHECK_THAT(r.err, Contains("data.vocab_size 1000"));
}

TEST_CASE("the moving average is checkpointed, resumed exactly and translates by default", "[e2e]") {
  TempDir data, straight, interrupted, input;
  const auto corpus = corpus_slice(data, 600);
  const std::string ema = " --set train.ema_decay=0.9";
  REQUIRE(run_command(kTrain + flags(straight.path(), corpus) + ema + " --set train.max_steps=4")
              .exit_code == 0);
  // Interrupted at 2 and resumed: every tensor, moving average included, equal at 4.
  copy_checkpoints(straight.path(), interrupted.path(), 2);
  auto r = run_command(kTrain + flags(interrupted.path(), corpus) + ema + " --set train.max_steps=4");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::string a = checkpoint_path(straight.path(), 4), b = checkpoint_path(interrupted.path(), 4);
  const auto diff = run_command(nmt::test::kCkptBin + " diff --all " + a + " " + b);
  CHECK(diff.exit_code == 0);
  CHECK_THAT(diff.out, Contains("\"ema.encoder_layers.0.ffn.fc1.weight\""));
  // nmt-translate takes the average unless told otherwise; the scores show which weights ran.
  const auto text = input.write("in.en", "This package contains the documentation.\nA library.\n");
  auto translate = [&](const std::string& weights) {
    return run_command(kTranslate + " --checkpoint " + a + " --input " + text.string() +
                       " --beam 2 --nbest 1 --max-len-b 5" + weights);
  };
  const auto by_default = translate(""), averaged = translate(" --weights ema"), raw = translate(" --weights raw");
  REQUIRE(by_default.exit_code == 0);
  CHECK_THAT(by_default.err, Contains("moving-average weights"));
  CHECK(by_default.out == averaged.out);
  REQUIRE(raw.exit_code == 0);
  CHECK_THAT(raw.err, !Contains("moving-average weights"));
  CHECK(raw.out != averaged.out);
  // Without an average in the checkpoint, asking for it is an error that says so.
  TempDir plain;
  REQUIRE(run_command(kTrain + flags(plain.path(), corpus) + " --set train.max_steps=2").exit_code == 0);
  r = run_command(kTranslate + " --checkpoint " + plain.path().string() + " --input " +
                  text.string() + " --weights ema");
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.err, Contains("has no ema.* tensors"));
}

TEST_CASE("several weighted corpora: each drawn by its weight, each with its own cache", "[e2e]") {
  TempDir data, run;
  const auto corpus = corpus_slice(data, 600);
  const std::string corpora =
      " --set data.train_src=null --set data.train_tgt=null --set 'data.train=[{name: curated, "
      "src: " + corpus.first + ", tgt: " + corpus.second + ", weight: 2}, {name: crawled, src: "
      "data/ddtp.en-de.valid.en, tgt: data/ddtp.en-de.valid.de, weight: 0.5}]'";
  const std::string base = " --config configs/tiny.yaml --set run_dir=" + run.path().string() +
                           " --set data.spm_model=" + nmt::test::shared_vocab() +
                           " --set data.max_tokens=1024 --set train.valid_every=0" + corpora;
  auto r = run_command(kTrain + base + " --dry-run");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::string stats = read_file(run.path() / "batch_stats.json");
  const auto drawn_by_corpus = nlohmann::ordered_json::parse(stats).at("corpora");
  auto drawn = [&drawn_by_corpus](const std::string& name) {
    for (const auto& corpus : drawn_by_corpus)
      if (corpus.at("name") == name)
        return std::pair<double, double>(corpus.at("pairs").get<double>(),
                                         corpus.at("drawn").get<double>());
    FAIL("no corpus " << name << " in batch_stats.json");
    return std::pair<double, double>();
  };
  const auto [curated_pairs, curated_drawn] = drawn("curated");
  const auto [crawled_pairs, crawled_drawn] = drawn("crawled");
  CHECK(curated_drawn == 2 * curated_pairs);
  CHECK(std::abs(crawled_drawn - 0.5 * crawled_pairs) <= 0.5);
  CHECK_THAT(r.err, Contains("corpus curated: " + std::to_string(int(curated_pairs)) + " pairs x weight 2"));
  // Training reads both, each through its own token cache.
  r = run_command(kTrain + base + " --set train.max_steps=2");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  int caches = 0;
  for (const auto& entry : std::filesystem::directory_iterator(run.path() / "cache")) {
    const std::string name = entry.path().filename().string();
    const bool cache = name.size() > 4 && name.compare(name.size() - 4, 4, ".tok") == 0;
    caches += cache && (name.rfind("train-curated.", 0) == 0 || name.rfind("train-crawled.", 0) == 0);
  }
  CHECK(caches == 2);
}

TEST_CASE("several validation sets are each reported, the first picks the best", "[e2e]") {
  TempDir data, run;
  const auto corpus = corpus_slice(data, 600);
  const std::string sets =
      " --set data.valid_src=null --set data.valid_tgt=null --set 'data.valid=[{name: indomain, "
      "src: data/ddtp.en-de.valid.en, tgt: data/ddtp.en-de.valid.de}, {name: trainslice, src: " +
      corpus.first + ", tgt: " + corpus.second + "}]'";
  auto r = run_command(kTrain + flags(run.path(), corpus) + sets +
                       " --set train.max_steps=2 --set train.valid_every=2");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Contains("| indomain | loss"));
  CHECK_THAT(r.err, Contains("| trainslice | loss"));
  const std::string metrics = read_file(run.path() / "metrics.jsonl");
  CHECK_THAT(metrics, Contains("\"type\": \"valid\", \"set\": \"indomain\""));
  CHECK_THAT(metrics, Contains("\"type\": \"valid\", \"set\": \"trainslice\""));
  // The checkpoint's validation loss is the first set's.
  std::optional<double> first_loss;
  for (const auto& record : nmt::test::json_values(metrics))
    if (record.value("set", "") == "indomain" && !first_loss)
      first_loss = record.at("loss").get<double>();
  REQUIRE(first_loss.has_value());
  const auto info = run_command(nmt::test::kCkptBin + " info " + checkpoint_path(run.path(), 2));
  CHECK_THAT(info.out, Contains("\"valid_loss\": \"" ));
  const auto stored = nmt::test::json_string(info.out, "valid_loss");
  REQUIRE(stored.has_value());
  // Both hold the same double, each as its shortest text.
  CHECK(std::abs(std::stod(*stored) - *first_loss) < 1e-9 * std::abs(*first_loss) + 1e-12);
}
