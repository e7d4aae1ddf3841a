"""scripts/distill.py's result: WORK/report.json, made from the stages' results (their markers),
and the table printed at the end.

report.json: "command"; "teachers" (what nmt-translate got as -c), "backward"; "corpus": pairs,
distilled pairs kept for the student, test sentences, the teacher's decoding figures; "student"
and "qat": their nmt-train summaries (final_step, stop_reason, ...); "models": one row per
model (model, label, bleu, chrf, model_bytes, and ct2_sentences_per_s_1_thread and
ct2_sentences_per_s_all_cores, or nmt_translate_sentences_per_s for the teacher as nmt-translate
runs it; "error" where a model could not be exported); "settings": beam, keep, threads;
"stages": each stage's seconds and when it finished."""
import json
from typing import Any

from nmt_tools.distill_setup import Context
from nmt_tools.text import write_json_atomic


def write_report(ctx: Context, results: dict[str, dict[str, Any]], argv: list[str]) -> dict:
    a, lay = ctx.args, ctx.layout
    corpus, translate = results["corpus"], results["translate"]
    filtered = results["filter"]
    report = {
        "command": argv,
        "work_dir": str(lay.work),
        "teachers": [str(t) for t in ctx.teachers],
        "teacher_hf": str(a.teacher_hf) if a.teacher_hf else None,
        "backward": str(a.backward) if a.backward else None,
        "corpus": {"pairs": corpus["pairs"],
                   "student_distilled_pairs": filtered.get("kept", corpus["pairs"]),
                   "test_sentences": corpus["test_sentences"],
                   "teacher_sentences_per_s": translate.get("sentences_per_s"),
                   "teacher_seconds": translate.get("seconds")},
        "student": results["student"],
        "qat": results["qat"],
        "models": results["evaluate"]["models"],
        "settings": {"search": (f"sampling {a.sampling} seed {a.seed}" if a.sampling
                                else f"beam {a.beam}"), "keep_percent": a.keep,
                     "original_weight": a.original_weight, "student": str(a.student_config),
                     "eval_beam": a.eval_beam, "threads_all": a.threads_all,
                     "eval_repeats": a.eval_repeats, "nproc": a.nproc, "set": a.set},
        "stages": stage_times(ctx, results),
    }
    write_json_atomic(lay.report, report)
    return report


def stage_times(ctx: Context, results: dict[str, Any]) -> dict[str, Any]:
    times = {}
    for name in results:
        with open(ctx.layout.marker(name), encoding="utf-8") as f:
            marker = json.load(f)
        times[name] = {"seconds": marker["seconds"], "finished_utc": marker["finished_utc"]}
    return times


def _number(value: Any, digits: int) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def print_table(report: dict) -> None:
    threads = report["settings"]["threads_all"]
    header = (f"{'model':<34}{'BLEU':>7}{'chrF':>7}{'size MB':>9}"
              f"{'sent/s 1 thread':>17}{f'sent/s {threads} thread' + 's' * (threads > 1):>19}")
    print(f"\ntest set: {report['corpus']['test_sentences']:,} sentences, beam "
          f"{report['settings']['eval_beam']}; speeds: CTranslate2 on CPU (the teacher's "
          "nmt-translate row: its own device and threads, in the 1-thread column's place)")
    print(header)
    for row in report["models"]:
        if "error" in row:
            print(f"{row['label']:<34}  not evaluated: {row['error']}")
            continue
        size = row["model_bytes"] / 1e6 if row.get("model_bytes") is not None else None
        one = row.get("ct2_sentences_per_s_1_thread", row.get("nmt_translate_sentences_per_s"))
        print(f"{row['label']:<34}{_number(row['bleu'], 2):>7}{_number(row['chrf'], 2):>7}"
              f"{_number(size, 1):>9}{_number(one, 1):>17}"
              f"{_number(row.get('ct2_sentences_per_s_all_cores'), 1):>19}")
    student = report["student"]
    print(f"student: {student['final_step']:,} updates ({student['stop_reason']}) on "
          f"{report['corpus']['student_distilled_pairs']:,} distilled pairs of "
          f"{report['corpus']['pairs']:,}; QAT {report['qat']['final_step']:,} updates; "
          f"report: {report['work_dir']}/report.json")
