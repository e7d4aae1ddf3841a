"""The last stages of scripts/distill.py: CTranslate2 exports (the teacher and the student in
float32, the student in int8 without and after QAT), and their evaluation on the test set:
BLEU and chrF (nmt-score --json), the model's size on disk, and CTranslate2's sentences per
second on one thread and on all cores (scripts/bench/ct2-translate.py --stats-json). The
teacher is also evaluated as nmt-translate runs it (an ensemble of several included).

Each export and each model's evaluation is kept as it finishes (stages.once): a stage killed
half-way redoes only what it had not finished."""
import statistics
import time
from pathlib import Path
from typing import Any, Optional

from nmt_tools.distill_data import teacher_flags
from nmt_tools.distill_setup import (Context, checkpoint_files, directory_bytes, file_identity,
                                     model_bytes, read_json)
from nmt_tools.process import CommandFailed, run
from nmt_tools.stages import Stage, StageError, duration, once

# The CTranslate2 models: name, what it is, and from where with which quantization.
STUDENT_EXPORTS = [("student", "student, float32", "student", "none"),
                   ("student-int8", "student, int8 without QAT", "student", "int8"),
                   ("student-qat-int8", "student, int8 after QAT", "qat", "int8")]


def exports(ctx: Context) -> list[tuple[str, str, Path, str]]:
    """(name, label, checkpoint or run directory, quantization) of each export. An ensemble has
    no CTranslate2 form: the teacher is exported when it is one model."""
    rows = [("teacher", "teacher, float32", ctx.teachers[0], "none")] if len(ctx.teachers) == 1 else []
    runs = {"student": ctx.layout.student, "qat": ctx.layout.qat}
    return rows + [(n, label, runs[r], q) for n, label, r, q in STUDENT_EXPORTS]


def export_stage(ctx: Context) -> Stage:
    lay = ctx.layout

    def export_one(name: str, source: Path, quantization: str) -> dict[str, Any]:
        out = lay.ct2 / name
        command = [ctx.tools.python, ctx.tools.export, source, out, "--quantization",
                   quantization, "--force"]
        print("+ " + " ".join(str(c) for c in command), flush=True)
        try:
            run(command)
        except CommandFailed as e:
            if name != "teacher":
                raise StageError(f"stage export: {e}") from e
            # A teacher our exporter cannot express (e.g. an import it does not know) still
            # has its nmt-translate figures.
            message = (e.result.stderr or e.result.stdout or "").strip().splitlines()
            ctx.say(f"export: the teacher has no CTranslate2 form: {message[-1:]}")
            return {"error": message[-1] if message else str(e)}
        return {"dir": str(out), "quantization": quantization,
                "model_bin_bytes": (out / "model.bin").stat().st_size,
                "bytes": directory_bytes(out)}

    def run_all():
        lay.ct2.mkdir(parents=True, exist_ok=True)
        result = {}
        for name, _, source, quantization in exports(ctx):
            identity = [file_identity(Path(f)) for f in checkpoint_files(source)]
            result[name] = once(lay.part_record("export", name),
                                {"checkpoint": identity, "quantization": quantization},
                                lambda: export_one(name, source, quantization), ctx.say)
        return result

    names = [e[0] for e in exports(ctx)]
    return Stage("export", f"export to CTranslate2 ({', '.join(names)})", {"exports": names},
                 run_all, outputs=[lay.ct2] + [lay.part_record("export", n) for n in names])


def ct2_rates(ctx: Context, model: Path, name: str, threads: int) -> tuple[float, Path]:
    """The median sentences/s of --eval-repeats translations of the test set, and the output."""
    lay, a = ctx.layout, ctx.args
    out = lay.eval / f"{name}.t{threads}.hyp"
    rates = []
    for repeat in range(a.eval_repeats):
        stats = lay.eval / f"{name}.t{threads}.{repeat}.json"
        ctx.tools.run("evaluate", [ctx.tools.python, ctx.tools.ct2_translate, model,
                                   "-i", lay.test_src, "-o", out, "--beam", str(a.eval_beam),
                                   "--threads", str(threads), "--stats-json", stats]
                      + (["--tgt-lang", a.tgt_lang] if a.tgt_lang and name == "teacher" else []))
        rates.append(read_json(stats, "evaluate")["sentences_per_s"])
    return statistics.median(rates), out


def evaluate_ct2(ctx: Context, name: str, export: dict[str, Any]) -> dict[str, Any]:
    one, hyp = ct2_rates(ctx, Path(export["dir"]), name, 1)
    threads = ctx.args.threads_all
    all_cores = one if threads == 1 else ct2_rates(ctx, Path(export["dir"]), name, threads)[0]
    return {**ctx.tools.bleu_chrf("evaluate", hyp, ctx.layout.test_tgt),
            "model_bytes": export["model_bin_bytes"], "ct2_sentences_per_s_1_thread": one,
            "ct2_sentences_per_s_all_cores": all_cores}


def evaluate_teacher(ctx: Context) -> dict[str, Any]:
    """The teacher as nmt-translate runs it (an ensemble included); its size is its model.*
    tensors as stored (all members of an ensemble)."""
    lay = ctx.layout
    hyp, stats = lay.eval / "teacher-nmt.hyp", lay.eval / "teacher-nmt.stats.json"
    ctx.tools.run("evaluate", [ctx.tools.translate, *teacher_flags(ctx), "-i", lay.test_src,
                               "-o", hyp, "--beam", str(ctx.args.eval_beam), "--amp",
                               ctx.args.amp, "--stats-json", stats, "--log-level", "warn"])
    size = sum(model_bytes(f) for t in ctx.teachers for f in checkpoint_files(t))
    return {**ctx.tools.bleu_chrf("evaluate", hyp, lay.test_tgt), "model_bytes": size,
            "nmt_translate_sentences_per_s": read_json(stats, "evaluate")["sentences_per_s"]}


def evaluate_stage(ctx: Context) -> Stage:
    """One row per model, from the exports the export stage recorded in its marker."""
    a, lay = ctx.args, ctx.layout
    settings = {"beam": a.eval_beam, "threads_all": a.threads_all, "repeats": a.eval_repeats,
                "amp": a.amp}
    label = (f"teacher, ensemble of {len(ctx.teachers)}" if len(ctx.teachers) > 1 else "teacher")
    rows = [("teacher-nmt", f"{label} (nmt-translate)", None)] + \
        [(name, text, name) for name, text, _, _ in exports(ctx)]

    def run_all():
        lay.eval.mkdir(parents=True, exist_ok=True)
        exported = read_json(lay.marker("export"), "evaluate")["result"]
        results, began = [], time.monotonic()
        for k, (name, text, export_name) in enumerate(rows, 1):
            results.append({"model": name, "label": text,
                            **evaluate_row(name, export_name, exported)})
            spent = time.monotonic() - began
            ctx.say(f"evaluate: {k}/{len(rows)} models done, ETA "
                    f"{duration(spent / k * (len(rows) - k))}")
        return {"models": results}

    def evaluate_ct2_row(name: str, export: dict[str, Any]) -> dict[str, Any]:
        try:
            return evaluate_ct2(ctx, name, export)
        except StageError as e:
            if name != "teacher":
                raise
            # The teacher's CTranslate2 row is a comparison; its nmt-translate row stands.
            return {"error": f"CTranslate2 could not translate with it: {e}"}

    def evaluate_row(name: str, export_name: Optional[str],
                     exported: dict[str, Any]) -> dict[str, Any]:
        if export_name is None:
            identity = teacher_flags(ctx)
            work = lambda: evaluate_teacher(ctx)  # noqa: E731
        else:
            export = exported[export_name]
            if "error" in export:
                return {"error": export["error"]}
            identity = file_identity(Path(export["dir"]) / "model.bin")
            work = lambda: evaluate_ct2_row(name, export)  # noqa: E731
        return once(lay.eval / f"{name}.json", {**settings, "model": identity}, work, ctx.say)

    threads = "1 thread" + (f" and {a.threads_all}" if a.threads_all > 1 else "")
    return Stage("evaluate", f"evaluate {len(rows)} models on the test set: BLEU, chrF, size, "
                 f"CTranslate2 sentences/s on {threads}",
                 settings, run_all, outputs=[lay.eval])
