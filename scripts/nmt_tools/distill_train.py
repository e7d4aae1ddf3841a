"""The training stages of scripts/distill.py: the student on the distilled corpus (and the
original pairs at a weight), then its int8 quantization-aware fine-tune.

Both are nmt-train runs in the work directory: a run killed half-way resumes from its newest
checkpoint when the stage runs again (nmt-train's --resume auto), and a finished one is only
read (summary.json). The pipeline's own keys go as --set, so that they also hold on a resume,
where the checkpoint's config would win over the YAML; the user's --set come after them."""
from pathlib import Path
from typing import Any

from nmt_tools import stored_config
from nmt_tools.distill_data import distilled_pairs
from nmt_tools.distill_setup import Context, file_identity, read_json
from nmt_tools.stages import Stage, StageError

# Stop reasons of summary.json after which a stage is finished (docs/training.md#summaryjson);
# "signal" is not one of them: that run resumes when the stage runs again.
FINISHED = ("max_steps", "max_epochs", "max_minutes", "early_stop", "already_done", "completed")
# What the student's summary.json gives the report.
SUMMARY_KEYS = ("final_step", "stop_reason", "last_checkpoint", "last_train_loss",
                "last_valid_loss", "tokens_per_s", "wall_s", "resumed_from")


def write_student_config(ctx: Context) -> Path:
    """WORK/student.yaml: the preset with the distilled corpus, the original pairs at
    --original-weight (left out at 0) and the validation set; model and optimizer as the
    preset has them."""
    import yaml

    a, lay = ctx.args, ctx.layout
    config = stored_config.parse(Path(a.student_config).read_text(encoding="utf-8"),
                                 str(a.student_config))
    data = config.setdefault("data", {})
    for key in ("train", "train_src", "train_tgt", "valid", "valid_src", "valid_tgt"):
        data.pop(key, None)
    src, tgt = distilled_pairs(ctx)
    corpora = [{"name": "distilled", "src": str(src), "tgt": str(tgt)}]
    if a.original_weight > 0:
        corpora.append({"name": "original", "src": str(lay.train_src),
                        "tgt": str(lay.train_tgt), "weight": a.original_weight})
    data["train"] = corpora
    data["valid_src"] = str(a.valid_src)
    data["valid_tgt"] = str(a.valid_tgt)
    config["run_dir"] = str(lay.student)
    with open(lay.student_config, "w", encoding="utf-8") as f:
        f.write(f"# Written by scripts/distill.py from {a.student_config}\n")
        yaml.safe_dump(config, f, sort_keys=False)
    return lay.student_config


def train(ctx: Context, stage: str, run_dir: Path, keys: dict[str, Any]) -> dict[str, Any]:
    """nmt-train on WORK/student.yaml into run_dir with `keys` and then --set; its summary."""
    command = [ctx.tools.train, "--config", ctx.layout.student_config]
    for key, value in {"run_dir": run_dir, **keys}.items():
        command += ["--set", f"{key}={value}"]
    for assignment in ctx.args.set:
        command += ["--set", assignment]
    ctx.tools.run(stage, command)
    summary = read_json(run_dir / "summary.json", stage)
    if summary.get("stop_reason") not in FINISHED:
        raise StageError(f"stage {stage}: nmt-train stopped at update {summary.get('final_step')}"
                         f" ({summary.get('stop_reason')}); run again to resume it")
    return {k: summary.get(k) for k in SUMMARY_KEYS}


def limits(steps: int, minutes: float) -> dict[str, Any]:
    """train.max_steps and train.max_minutes where given (0: the config's)."""
    keys = {}
    if steps:
        keys["train.max_steps"] = steps
    if minutes:
        keys["train.max_minutes"] = minutes
    return keys


def student_stage(ctx: Context) -> Stage:
    a, lay = ctx.args, ctx.layout

    def run():
        write_student_config(ctx)
        return train(ctx, "student", lay.student, limits(a.student_steps, a.student_minutes))

    settings = {"preset": file_identity(a.student_config), "steps": a.student_steps,
                "minutes": a.student_minutes, "original_weight": a.original_weight,
                "valid_src": file_identity(a.valid_src), "valid_tgt": file_identity(a.valid_tgt),
                "set": a.set}
    return Stage("student", f"train the student ({Path(a.student_config).name}) on the distilled "
                 "corpus" + (f" and the original pairs at weight {a.original_weight:g}"
                             if a.original_weight > 0 else ""),
                 settings, run, outputs=[lay.student_config, lay.student],
                 budget_s=a.student_minutes * 60 if a.student_minutes else None)


def qat_stage(ctx: Context) -> Stage:
    """train.quantize: int8 from the student's weights (train.init_from), a lower learning rate
    and no warm-up (docs/training.md#students-and-int8)."""
    a, lay = ctx.args, ctx.layout
    keys = {"train.init_from": lay.student, "train.quantize": "int8", "train.lr": a.qat_lr,
            "train.warmup_steps": 0, **limits(a.qat_steps, a.qat_minutes)}

    def run():
        return train(ctx, "qat", lay.qat, keys)

    settings = {"steps": a.qat_steps, "minutes": a.qat_minutes, "lr": a.qat_lr, "set": a.set}
    return Stage("qat", "fine-tune the student for int8 (quantization-aware)", settings, run,
                 outputs=[lay.qat], budget_s=a.qat_minutes * 60 if a.qat_minutes else None)
