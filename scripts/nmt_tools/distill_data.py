"""The data stages of scripts/distill.py: import a Hugging Face teacher, copy the corpus and the
test set, translate the corpus with the teacher, score the pairs and filter them.

Each function takes the pipeline's Context and returns its Stage (nmt_tools/stages.py):
settings (what the output depends on), the work, and what it writes."""
import gzip
import json
from pathlib import Path
from typing import Any, BinaryIO

from nmt_tools.distill_setup import (Context, checkpoint_files, file_identity, read_json)
from nmt_tools.stages import Stage, StageError, once


def _open_binary(path: Path) -> BinaryIO:
    return gzip.open(path, "rb") if str(path).endswith(".gz") else open(path, "rb")


def copy_pairs(src: Path, tgt: Path, out_src: Path, out_tgt: Path, limit: int) -> int:
    """Copies the first `limit` pairs (0: all) of two aligned files (plain or gzip) as plain
    files, bytes unchanged; returns the pairs. StageError naming both files when the sides
    differ in length (within the limit)."""
    pairs = 0
    with _open_binary(src) as a, _open_binary(tgt) as b, \
            open(out_src, "wb") as x, open(out_tgt, "wb") as y:
        while not limit or pairs < limit:
            line_a, line_b = a.readline(), b.readline()
            if not line_a and not line_b:
                break
            if not line_a or not line_b:
                short, long_ = (src, tgt) if not line_a else (tgt, src)
                raise StageError(f"stage corpus: {short} has {pairs} lines, {long_} more: the "
                                 "two sides of a corpus must have as many lines")
            x.write(line_a if line_a.endswith(b"\n") else line_a + b"\n")
            y.write(line_b if line_b.endswith(b"\n") else line_b + b"\n")
            pairs += 1
    return pairs


def hf_identity(folder: Path) -> dict[str, Any]:
    """A Hugging Face model directory's identity: its config and weight files."""
    files = sorted(p for p in Path(folder).iterdir()
                   if p.name == "config.json" or p.suffix == ".safetensors")
    return {"hf_dir": str(Path(folder).resolve()), "files": [file_identity(p) for p in files]}


def teacher_identity(ctx: Context) -> list[dict[str, Any]]:
    """The teacher checkpoints (each the file nmt-translate takes), or the imported directory."""
    if ctx.args.teacher_hf:
        return [hf_identity(ctx.args.teacher_hf)]
    return [file_identity(Path(f)) for t in ctx.args.teacher for f in checkpoint_files(t)]


def import_stage(ctx: Context) -> Stage:
    """nmt-ckpt import-hf DIR: the teacher as one of our checkpoints."""
    out = ctx.layout.teacher_import

    def run():
        out.parent.mkdir(parents=True, exist_ok=True)
        text = ctx.tools.output_of("import", [ctx.tools.ckpt, "import-hf", ctx.args.teacher_hf,
                                              "-o", out, "--force"])
        info = json.loads(text)
        return {"checkpoint": str(out), "model_type": info.get("model_type"),
                "parameters": info.get("parameters")}

    return Stage("import", f"import the Hugging Face teacher {ctx.args.teacher_hf}",
                 {"teacher": teacher_identity(ctx)}, run, outputs=[out.parent])


def corpus_stage(ctx: Context) -> Stage:
    """The corpus (its first --corpus-lines pairs) and the test set as plain files."""
    a, lay = ctx.args, ctx.layout

    def run():
        lay.data.mkdir(parents=True, exist_ok=True)
        pairs = copy_pairs(a.src, a.tgt, lay.train_src, lay.train_tgt, a.corpus_lines)
        if pairs == 0:
            raise StageError(f"stage corpus: {a.src} is empty")
        test = copy_pairs(a.test_src, a.test_tgt, lay.test_src, lay.test_tgt, a.test_lines)
        return {"pairs": pairs, "test_sentences": test}

    settings = {"src": file_identity(a.src), "tgt": file_identity(a.tgt),
                "corpus_lines": a.corpus_lines, "test_src": file_identity(a.test_src),
                "test_tgt": file_identity(a.test_tgt), "test_lines": a.test_lines}
    return Stage("corpus", "copy the training corpus and the test set as plain text", settings,
                 run, outputs=[lay.train_src, lay.train_tgt, lay.test_src, lay.test_tgt])


def teacher_flags(ctx: Context) -> list[str]:
    """-c for each teacher (several: an ensemble, as nmt-translate -c A -c B decodes it), the
    languages of a multilingual one, and --teacher-arg."""
    a = ctx.args
    flags = []
    for teacher in ctx.teachers:
        flags += ["-c", str(teacher)]
    if a.src_lang:
        flags += ["--src-lang", a.src_lang]
    if a.tgt_lang:
        flags += ["--tgt-lang", a.tgt_lang]
    return flags + list(a.teacher_arg)


def corpus_flags(ctx: Context, stats: Path) -> list[str]:
    """nmt-translate's corpus mode: on --nproc workers, resumable, with its --stats-json."""
    a = ctx.args
    flags = ["--nproc-per-node", str(a.nproc), "--stats-json", str(stats), "--amp", a.amp]
    if a.shard_lines:
        flags += ["--shard-lines", str(a.shard_lines)]
    return flags


def ensemble_hint(ctx: Context) -> str:
    if len(ctx.teachers) < 2:
        return ""
    return (f"\n(with {len(ctx.teachers)} teachers nmt-translate gets one -c each, an ensemble: "
            "this build must decode ensembles; give one --teacher otherwise)")


def translate_stage(ctx: Context) -> Stage:
    a, lay = ctx.args, ctx.layout
    stats = lay.stats / "translate.json"
    search = (["--sampling", a.sampling, "--seed", str(a.seed)] if a.sampling
              else ["--beam", str(a.beam)])

    def run():
        lay.stats.mkdir(parents=True, exist_ok=True)
        try:
            ctx.tools.run("translate", [ctx.tools.translate, *teacher_flags(ctx), "-i",
                                        lay.train_src, "-o", lay.distilled, *search,
                                        *corpus_flags(ctx, stats)])
        except StageError as e:
            raise StageError(str(e) + ensemble_hint(ctx)) from e
        figures = read_json(stats, "translate")
        return {k: figures.get(k) for k in ("lines", "sentences", "output_tokens", "seconds",
                                            "sentences_per_s", "shards", "shards_resumed")}

    settings = {"teacher": teacher_identity(ctx), "search": search, "amp": a.amp,
                "languages": [a.src_lang, a.tgt_lang], "teacher_arg": a.teacher_arg}
    return Stage("translate", f"the teacher translates the corpus ({' '.join(search)}, "
                 f"{a.nproc} worker(s))", settings, run,
                 outputs=[lay.distilled, lay.parts(lay.distilled), stats])


def filtering(ctx: Context) -> bool:
    return ctx.args.keep < 100


def score_stage(ctx: Context) -> Stage:
    """Teacher-forced scores of the distilled pairs: the teacher's p(distilled | source), and
    with --backward the backward model's p(source | distilled)."""
    a, lay = ctx.args, ctx.layout

    def score(name, checkpoint_flags, source, target, out):
        stats = lay.stats / f"score-{name}.json"

        def run():
            ctx.tools.run("score", [ctx.tools.translate, *checkpoint_flags, "-i", source,
                                    "--score", target, "-o", out, *corpus_flags(ctx, stats)])
            figures = read_json(stats, "score")
            return {"lines": figures.get("lines"), "seconds": figures.get("seconds")}

        return once(lay.part_record("score", name), settings, run, ctx.say)

    def run():
        lay.stats.mkdir(parents=True, exist_ok=True)
        result = {"forward": score("forward", teacher_flags(ctx), lay.train_src,
                                   lay.distilled, lay.forward_scores)}
        if a.backward:
            result["backward"] = score("backward", ["-c", str(a.backward)], lay.distilled,
                                       lay.train_src, lay.backward_scores)
        return result

    settings = {"teacher": teacher_identity(ctx), "amp": a.amp,
                "backward": [file_identity(Path(f)) for f in checkpoint_files(a.backward)]
                if a.backward else None}
    outputs = [lay.forward_scores, lay.backward_scores, lay.parts(lay.forward_scores),
               lay.parts(lay.backward_scores), lay.part_record("score", "forward"),
               lay.part_record("score", "backward"), lay.stats / "score-forward.json",
               lay.stats / "score-backward.json"]
    what = ("score the distilled pairs with the teacher" +
            (" and the backward model" if a.backward else ""))
    return Stage("score", what, settings, run, outputs=outputs,
                 skip_reason=None if filtering(ctx) else "--keep 100: every pair is kept")


def filter_stage(ctx: Context) -> Stage:
    a, lay = ctx.args, ctx.layout
    kept = [lay.kept.with_suffix(".src"), lay.kept.with_suffix(".tgt")]

    def run():
        command = [ctx.tools.python, ctx.tools.filter, "--src", lay.train_src,
                   "--tgt", lay.distilled, "--scores", lay.forward_scores,
                   "--keep-best", str(a.keep), "--out", lay.kept, "--report", lay.filter_report]
        if a.backward:
            command += ["--backward-scores", lay.backward_scores]
        ctx.tools.run("filter", command)
        report = read_json(lay.filter_report, "filter")
        return {k: report.get(k) for k in ("pairs", "kept", "dropped", "dropped_unusable")}

    how = "dual conditional cross-entropy" if a.backward else "the teacher's cross-entropy"
    return Stage("filter", f"keep the best {a.keep:g}% of the distilled pairs by {how}",
                 {"keep": a.keep, "backward": bool(a.backward)}, run,
                 outputs=kept + [lay.filter_report],
                 skip_reason=None if filtering(ctx) else "--keep 100: every pair is kept")


def distilled_pairs(ctx: Context) -> tuple[Path, Path]:
    """The student's distilled corpus: the kept pairs, or every pair without filtering."""
    lay = ctx.layout
    if filtering(ctx):
        return lay.kept.with_suffix(".src"), lay.kept.with_suffix(".tgt")
    return lay.train_src, lay.distilled
