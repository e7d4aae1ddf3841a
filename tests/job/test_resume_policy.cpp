// job/resume_policy: where a run resumes, what it sets aside and with which config; the
// decisions over a listing, then the functions that read run_dir's checkpoints.
#include "catch_torch.h"

#include <string>
#include <vector>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/checkpoint_file.h"
#include "checkpoint/run_metadata.h"
#include "config/run_config.h"
#include "job/job_fixture.h"
#include "job/resume_policy.h"
#include "util/error.h"

using nmt::config::ResumeFrom;
using nmt::config::RunConfig;
using nmt::job::Rank;
using nmt::test::one_cpu;
using nmt::test::set_up;
using nmt::test::TinyRun;

TEST_CASE("resume policy: a restart takes the newest readable file after the job's start",
          "[job]") {
  using Mode = ResumeFrom::Mode;
  using nmt::job::ListedCheckpoint;
  const std::vector<ListedCheckpoint> listing{{"c-40", 40, false}, {"c-30", 30, true},
                                              {"c-20", 20, true}, {"c-10", 10, true}};
  const ResumeFrom from_path{Mode::kPath, "c-10"};
  // The damaged newest is passed over; the file is named, so it loads as --resume PATH does.
  CHECK(nmt::job::restart_point(listing, 10, from_path).path == "c-30");
  CHECK(nmt::job::restart_point(listing, 10, from_path).mode == Mode::kPath);
  // Nothing readable after the start: the start.
  CHECK(nmt::job::restart_point(listing, 30, from_path).path == "c-10");
  CHECK(nmt::job::restart_point({}, 0, {Mode::kNone, {}}).mode == Mode::kNone);
  // A start of unknown step (a file gone, its name not a checkpoint's): any readable file.
  CHECK(nmt::job::restart_point(listing, std::nullopt, from_path).path == "c-30");
  // auto stays auto: it finds the newest itself.
  CHECK(nmt::job::restart_point(listing, 10, {Mode::kAuto, {}}).mode == Mode::kAuto);
  // What the job replaced: everything for none, nothing for auto.
  CHECK(nmt::job::replaced_after({Mode::kNone, {}}) == 0);
  CHECK_FALSE(nmt::job::replaced_after({Mode::kAuto, {}}).has_value());
  CHECK(nmt::job::replaced_after({Mode::kPath, "/gone/checkpoint-00000070.safetensors"}) == 70);
}

TEST_CASE("resume policy: the checkpoint to resume is none, the newest of this model, or the "
          "given file", "[job]") {
  const TinyRun run;
  const RunConfig config = run.config();
  const ResumeFrom auto_resume{ResumeFrom::Mode::kAuto, {}};
  CHECK_FALSE(nmt::job::find_resume_checkpoint(config, auto_resume).has_value());  // none yet
  RunConfig other_model = config;
  other_model.model.d_model = 32;
  const auto ours = run.save_checkpoint(config, 10);
  const auto theirs = run.save_checkpoint(other_model, 20);
  const auto found = nmt::job::find_resume_checkpoint(config, auto_resume);
  REQUIRE(found.has_value());
  CHECK(found->path == ours);  // the newer file is of another model: passed over
  CHECK(found->data.metadata.at("step") == "10");
  CHECK_FALSE(nmt::job::find_resume_checkpoint(config, {ResumeFrom::Mode::kNone, {}}));
  const auto given =
      nmt::job::find_resume_checkpoint(config, {ResumeFrom::Mode::kPath, theirs.string()});
  REQUIRE(given.has_value());
  CHECK(given->path == theirs);
  CHECK_THROWS_AS(nmt::job::find_resume_checkpoint(
                      config, {ResumeFrom::Mode::kPath, (run.dir.path() / "missing").string()}),
                  nmt::CheckpointError);
  std::filesystem::remove(ours);  // only another model's checkpoint left: an error, not fresh
  CHECK_THROWS_AS(nmt::job::find_resume_checkpoint(config, auto_resume), nmt::CheckpointError);
}

TEST_CASE("resume policy: a restarted worker resumes from the job's newest checkpoint", "[job]") {
  // With --resume PATH, every restart (--max-restarts) went back to PATH: the updates since
  // were lost and trained again, each time.
  const TinyRun run;
  const RunConfig config = run.config();
  using Mode = ResumeFrom::Mode;
  const auto started = run.save_checkpoint(config, 10);
  const ResumeFrom from_path{Mode::kPath, started.string()};
  // Nothing saved since the start: the same start.
  CHECK(nmt::job::resume_after_restart(config, from_path).path == started.string());
  CHECK(nmt::job::resume_after_restart(config, {Mode::kAuto, {}}).mode == Mode::kAuto);
  const auto newer = run.save_checkpoint(config, 20);
  // The job's newest, named as a file (auto would check it against the YAML's model).
  const ResumeFrom restart = nmt::job::resume_after_restart(config, from_path);
  CHECK(restart.mode == Mode::kPath);
  CHECK(restart.path == newer.string());
  CHECK(nmt::job::resume_after_restart(config, {Mode::kNone, {}}).path == newer.string());
  // PATH deleted since by retention: its step is read from its name; the restart still works.
  std::filesystem::remove(started);
  CHECK(nmt::job::resume_after_restart(config, from_path).path == newer.string());
  // A damaged newest save is passed over for an older one of the job's.
  const auto damaged = run.save_checkpoint(config, 30);
  std::filesystem::resize_file(damaged, 10);
  CHECK(nmt::job::resume_after_restart(config, from_path).path == newer.string());
  // A start later than anything in run_dir (a file from elsewhere) stays the start.
  const TinyRun elsewhere;
  const auto later = elsewhere.save_checkpoint(config, 40);
  CHECK(nmt::job::resume_after_restart(config, {Mode::kPath, later.string()}).path ==
        later.string());
  // No checkpoint at all: --resume none stays none.
  const TinyRun empty;
  CHECK(nmt::job::resume_after_restart(empty.config(), {Mode::kNone, {}}).mode == Mode::kNone);
}

TEST_CASE("resume policy: before a job starts the replaced run's later checkpoints are set aside",
          "[job]") {
  // Moved only when training began: a first attempt that failed in its setup left them, and
  // its restart resumed the replaced run's newest.
  using Mode = ResumeFrom::Mode;
  const TinyRun run;
  const RunConfig config = run.config();
  const auto ten = run.save_checkpoint(config, 10);
  run.save_checkpoint(config, 20);
  run.save_checkpoint(config, 30);
  CHECK_FALSE(nmt::job::set_aside_replaced_checkpoints(config, {Mode::kAuto, {}}));
  const auto folder = nmt::job::set_aside_replaced_checkpoints(config, {Mode::kPath, ten.string()});
  REQUIRE(folder);
  CHECK(std::filesystem::exists(*folder / "checkpoint-00000020.safetensors"));
  CHECK(std::filesystem::exists(*folder / "checkpoint-00000030.safetensors"));
  CHECK(nmt::checkpoint::CheckpointDir(run.checkpoints(), config.checkpoint).list() ==
        std::vector<std::filesystem::path>{ten});
  const auto all = nmt::job::set_aside_replaced_checkpoints(config, {Mode::kNone, {}});
  REQUIRE(all);
  CHECK(std::filesystem::exists(*all / "checkpoint-00000010.safetensors"));
}

TEST_CASE("resume policy: the launcher counts workers from the config the resumed run will have",
          "[job]") {
  // The launcher decided from the YAML and flags alone: a run started with --nproc-per-node 2
  // and run again without the flag went on as 1 rank (half the global batch).
  using Mode = ResumeFrom::Mode;
  const TinyRun run;
  RunConfig two_workers = run.config();
  two_workers.dist.nproc_per_node = 2;
  CHECK(nmt::job::config_to_resume(run.command.sources, run.config(), {Mode::kAuto, {}})
            .dist.nproc_per_node == 0);  // nothing to resume: the YAML's
  const auto saved = run.save_checkpoint(two_workers, 10);
  CHECK(nmt::job::config_to_resume(run.command.sources, run.config(), {Mode::kAuto, {}})
            .dist.nproc_per_node == 2);
  CHECK(nmt::job::config_to_resume(run.command.sources, run.config(), {Mode::kPath, saved.string()})
            .dist.nproc_per_node == 2);
  CHECK(nmt::job::config_to_resume(run.command.sources, run.config(), {Mode::kNone, {}})
            .dist.nproc_per_node == 0);
  // --set (--nproc-per-node) still wins over the checkpoint.
  nmt::config::ConfigSources with_flag = run.command.sources;
  with_flag.overrides.push_back("dist.nproc_per_node=1");
  CHECK(
      nmt::job::config_to_resume(with_flag, run.config(), {Mode::kAuto, {}}).dist.nproc_per_node ==
      1);
  // A file whose metadata does not read leaves the config as it is (the workers say why).
  CHECK(nmt::job::config_to_resume(run.command.sources, run.config(),
                                   {Mode::kPath, (run.dir.path() / "missing").string()})
            .dist.nproc_per_node == 0);
}

TEST_CASE("resume policy: a resume that ranks checkpoints otherwise starts the best record over",
          "[job]") {
  // Kept, a best of minus BLEU (say -25) compared with losses would never be beaten: patience
  // stopped the run and keep_best kept the old files.
  const TinyRun run;
  const RunConfig config = run.config();
  const auto file = run.save_checkpoint(config, 10);
  nmt::job::LoadedCheckpoint resume{file, nmt::checkpoint::load_checkpoint(file)};
  resume.data.metadata["best_selection"] = "-25";
  resume.data.metadata["validations_without_improvement"] = "3";
  CHECK_FALSE(nmt::job::restart_best_record_if_ranked_otherwise(resume, config));
  CHECK(resume.data.metadata.count("best_selection") == 1);
  RunConfig by_bleu = config;
  by_bleu.train.best_metric = nmt::train::BestMetric::kBleu;
  CHECK(nmt::job::restart_best_record_if_ranked_otherwise(resume, by_bleu));
  CHECK(resume.data.metadata.count("best_selection") == 0);
  CHECK(resume.data.metadata.count("validations_without_improvement") == 0);
  const auto meta = nmt::checkpoint::RunMetadata::parse(resume.data.metadata, file.string());
  CHECK_FALSE(meta.best_selection);
  CHECK(meta.validations_without_improvement == 0);
  RunConfig other_set = config;
  other_set.train.best_set = "news";
  resume.data.metadata["best_selection"] = "1.5";
  CHECK(nmt::job::restart_best_record_if_ranked_otherwise(resume, other_set));
  CHECK(resume.data.metadata.count("best_selection") == 0);
}

TEST_CASE("resume policy: a resumed run's config has the checkpoint's between the file and --set",
          "[job]") {
  const TinyRun run({"train.seed=7"});
  RunConfig saved = run.config();
  saved.train.lr = 0.125;
  saved.train.seed = 3;
  saved.data.max_tokens = 3000;
  const auto file = run.save_checkpoint(saved, 10);
  CHECK(nmt::job::resumed_config(run.command.sources, run.config(), std::nullopt).train.lr ==
        run.config().train.lr);
  const auto resume = nmt::job::find_resume_checkpoint(run.config(), {ResumeFrom::Mode::kAuto, {}});
  REQUIRE(resume.has_value());
  const RunConfig resumed = nmt::job::resumed_config(run.command.sources, run.config(), resume);
  CHECK(resumed.train.lr == 0.125);           // the checkpoint's, over the file's default
  CHECK(resumed.data.max_tokens == 3000);     // the checkpoint's, over the file's 2000
  CHECK(resumed.train.seed == 7);             // --set wins over the checkpoint
  // set_up_rank does the same, and plans with the checkpoint's budget.
  const Rank rank = set_up(run, ResumeFrom::Mode::kAuto);
  REQUIRE(rank.resume.has_value());
  CHECK(rank.resume->path == file);
  CHECK(rank.config.train.lr == 0.125);
  CHECK(rank.setup.max_tokens == 3000);
}
