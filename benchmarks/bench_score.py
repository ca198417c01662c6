"""Speed and peak memory of the scorer on real responses, against a straightforward per-example reference scorer.

    .venv/bin/python benchmarks/bench_score.py [--sizes 6k,60k,200k,1m] [--variants repeated,unique]
        [--repeats 3] [--reference-max 200000] [--in-process-max 60000] [--data-dir ../shared/data]

Corpus: the real test responses of every default benchmark dataset (about 6,300; size `6k` is exactly that set),
repeated under new ids up to the size (`repeated`), or with a copy number appended to every repeated response
so that no text repeats (`unique`). Contexts and questions stay in the files, as a user's EXAMPLES file has
them. Predictions: seeded random spans (45% of the responses get 1-3 spans of 10-120 characters).

Whole process, alternating in each repeat: `shambench score --examples --predictions --out` with empty caches
(cold), the reference, then `shambench score` again with the segmentation cache the cold run filled but without the
file's kept corpus (warm cache: every line is read and checked again, no text is tokenised), and once more with
every cache the cold run filled (warm corpus: the EXAMPLES file, unchanged, is not read again; corpora up to 256 MB
are kept, so from about 100,000 examples this equals warm cache). Wall time, CPU time (the process and its workers)
and peak RSS (the largest of the process and its workers, from wait4) of each; medians over the repeats, each ratio
of medians printed beside the range of the repeats' own ratios (a verdict inside that range's noise is not a
measured one). In process (sizes up to --in-process-max): the same cold and warm-cache runs as
`Scorer(...).score(...)` calls, warm rescoring of new predictions with the same `Scorer` (bootstrap intervals
included), and the reference on the same examples.

The reference reads the files with `json`, tokenises every response with spaCy's blank English pipeline and
sentencizer (`nlp.pipe`), and scores each example in Python loops: per-example token and sentence P/R/F1 under
the SHAM-Bench empty rule, averaged per task, then over tasks; no intervals. Its overall F1s are printed beside
shambench's, which must agree.

Targets (ratios to the reference): cold ≥ 2x (issue #29; issue #20 had 1.6x) and warm cache ≥ 5x (whole process,
6k; warm corpus is shown beside them), warm rescoring ≥ 20x (in process), peak memory ≤ 1 GiB at 200k and ≤ 4 GiB at
1M (issue #20). The machines these run on are
shared: absolute times vary with the load, which the report prints.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

TARGETS = {"cold": 2.0, "warm cache": 5.0, "rescoring": 20.0}
MEMORY_TARGETS = {200_000: 1.0, 1_000_000: 4.0}
SIZES = {"6k": 0, "60k": 60_000, "200k": 200_000, "1m": 1_000_000}
SPAN_SHARE = 0.45


# ---------------------------------------------------------------------------------------------------------------
# The straightforward reference scorer


def reference_prf(gold: list[bool], pred: list[bool]) -> float:
    """Per-example F1 of unit labels under the SHAM-Bench empty rule."""
    tp = sum(g and p for g, p in zip(gold, pred))
    n_gold, n_pred = sum(gold), sum(pred)
    if n_gold == 0 and n_pred == 0:
        return 1.0
    precision = tp / n_pred if n_pred else 0.0
    recall = tp / n_gold if n_gold else 0.0
    return 2 * precision * recall / (precision + recall) if precision + recall else 0.0


def marked(units: list[tuple[int, int]], spans: list[tuple[int, int]]) -> list[bool]:
    """Whether each unit overlaps a span by at least one character."""
    return [any(s < ue and us < e for s, e in spans) for us, ue in units]


def reference_scores(examples: list[dict], predictions: dict[str, list[tuple[int, int]]]) -> dict[str, float]:
    """Overall token and sentence F1: per-example F1 averaged per task, then over tasks."""
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    per_task: dict[str, dict[str, list[float]]] = defaultdict(lambda: {"token": [], "sentence": []})
    for ex, doc in zip(examples, nlp.pipe(ex["response"] for ex in examples)):
        tokens = [(t.idx, t.idx + len(t.text)) for t in doc if not t.is_space]
        sentences = []
        for sent in doc.sents:
            words = [t for t in sent if not t.is_space]
            if words:
                sentences.append((words[0].idx, words[-1].idx + len(words[-1].text)))
        gold = [(s["start"], s["end"]) for s in ex["hallu_spans"]]
        pred = predictions.get(ex["id"], [])
        for level, units in (("token", tokens), ("sentence", sentences)):
            per_task[ex["task"]][level].append(reference_prf(marked(units, gold), marked(units, pred)))
    return {
        level: float(np.mean([np.mean(scores[level]) for scores in per_task.values()]))
        for level in ("token", "sentence")
    }


def read_reference_inputs(examples_path: str, predictions_path: str):
    """The examples (as dicts) and the predicted spans per id, read with `json` line by line."""
    examples = []
    with open(examples_path, encoding="utf-8") as fh:
        for line in fh:
            obj = json.loads(line)
            examples.append({k: obj[k] for k in ("id", "task", "response", "hallu_spans")})
    predictions = {}
    with open(predictions_path, encoding="utf-8") as fh:
        for line in fh:
            obj = json.loads(line)
            predictions[obj["id"]] = [tuple(s) for s in obj["spans"]]
    return examples, predictions


def reference_main(examples_path: str, predictions_path: str) -> None:
    """The reference as its own process: prints its overall F1s as JSON."""
    print(json.dumps(reference_scores(*read_reference_inputs(examples_path, predictions_path))))


# ---------------------------------------------------------------------------------------------------------------
# The corpus files


def real_examples(data_dir: str) -> list[dict]:
    """The real test examples of every default dataset, as JSON objects."""
    from shambench.data.benchmark import load_benchmark

    bench = load_benchmark(None, "test", data_dir)
    return [json.loads(ex.model_dump_json(exclude_none=True)) for ex in bench.examples]


def write_corpus(base: list[dict], n: int, unique: bool, folder: Path, seed: int) -> tuple[Path, Path]:
    """EXAMPLES and PREDICTIONS files of `n` examples made of the real ones (see the module docstring)."""
    rng = np.random.default_rng(seed)
    examples_path, predictions_path = folder / "examples.jsonl", folder / "predictions.jsonl"
    with examples_path.open("w", encoding="utf-8") as ex_out, predictions_path.open("w", encoding="utf-8") as p_out:
        for i in range(n):
            copy, ex = divmod(i, len(base))
            obj = dict(base[ex])
            if copy:
                obj["id"] = f"{obj['id']}#{copy}"
                if unique:
                    obj["response"] = f"{obj['response']} (copy {copy})"
            ex_out.write(json.dumps(obj, ensure_ascii=False) + "\n")
            length = len(base[ex]["response"])
            spans = []
            if length and rng.random() < SPAN_SHARE:
                for _ in range(int(rng.integers(1, 4))):
                    start = int(rng.integers(0, length))
                    spans.append([start, min(length, start + int(rng.integers(10, 121)))])
            p_out.write(json.dumps({"id": obj["id"], "spans": spans}) + "\n")
    return examples_path, predictions_path


# ---------------------------------------------------------------------------------------------------------------
# Measuring


def timed_process(cmd: list[str], env: dict[str, str]) -> dict:
    """Wall seconds, CPU seconds and peak RSS (GiB) of one process and the workers it waited for, and its stdout.

    The command is started by a small launcher (this script with `--measure`), which reports what `os.wait4` says
    of it: Linux keeps a process's peak RSS across `exec`, so a command forked straight from this (large) process
    would report this process's size as its own.
    """
    with tempfile.NamedTemporaryFile("r", suffix=".json") as report:
        launcher = [sys.executable, __file__, "--measure", report.name, "--", *cmd]
        proc = subprocess.run(launcher, env=env, capture_output=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr.decode()[-3000:]}")
        measured = json.loads(Path(report.name).read_text())
    return {**measured, "out": proc.stdout.decode()}


def measure_main(report: str, cmd: list[str]) -> None:
    """The launcher: run `cmd` (output passed through), write its wall and CPU seconds and peak RSS to `report`, and
    exit with its status."""
    t0 = time.perf_counter()
    child = subprocess.Popen(cmd)
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - t0
    result = {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "peak_gib": usage.ru_maxrss / 2**20}
    Path(report).write_text(json.dumps(result))
    sys.exit(os.waitstatus_to_exitcode(status))


def timed(fn):
    """`(wall seconds, result)` of one call."""
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def median(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def whole_process(examples_path: Path, predictions_path: Path, work: Path, repeats: int, reference: bool) -> dict:
    """Median cold, reference and warm-cache runs, alternating in each repeat (see the module docstring)."""
    runs: dict[str, list[dict]] = defaultdict(list)
    results_path = work / "results.json"
    score_cmd = [sys.executable, "-m", "shambench", "score", "--examples", str(examples_path)]
    score_cmd += ["--predictions", str(predictions_path), "--out", str(results_path)]
    for rep in range(repeats):
        cache = work / f"cache{rep}"
        env = {**os.environ, "SHAMBENCH_CACHE_DIR": str(cache)}
        runs["cold"].append(timed_process(score_cmd, env))
        if reference:
            ref_cmd = [sys.executable, __file__, "--reference", str(examples_path), str(predictions_path)]
            runs["reference"].append(timed_process(ref_cmd, env))
        # The segmentation cache alone (the file's kept corpus removed), then every cache the cold run filled.
        shutil.rmtree(cache / "corpora", ignore_errors=True)
        runs["warm cache"].append(timed_process(score_cmd, env))
        runs["warm corpus"].append(timed_process(score_cmd, env))
        shutil.rmtree(cache, ignore_errors=True)
    summary: dict = {kind: {k: median(rows, k) for k in ("wall", "cpu", "peak_gib")} for kind, rows in runs.items()}
    # Each repeat's own ratio (its reference against its runs, timed minutes apart): their spread is the noise.
    summary["paired"] = {
        kind: [ref["wall"] / ours["wall"] for ref, ours in zip(runs["reference"], runs[kind])]
        for kind in ("cold", "warm cache", "warm corpus")
    }
    results = json.loads(results_path.read_text())
    summary["shambench_f1"] = {lvl: results["overall"][lvl]["f1"] for lvl in ("token", "sentence")}
    if reference:
        summary["reference_f1"] = json.loads(runs["reference"][-1]["out"])
    return summary


def in_process(examples_path: Path, predictions_path: Path, work: Path, repeats: int) -> dict:
    """Cold, warm-cache and warm-rescoring `Scorer` runs and the reference on the same examples, in this process."""
    from shambench.records import read_examples, read_predictions
    from shambench.scoring.scorer import Scorer
    from shambench.scoring.text import clear_cache

    examples = read_examples(examples_path)
    predictions = [p for _, p in read_predictions(predictions_path)]
    os.environ["SHAMBENCH_CACHE_DIR"] = str(work / "cache-in-process")
    clear_cache()
    cold, _ = timed(lambda: Scorer(examples).score(predictions))
    clear_cache()
    warm_cache, _ = timed(lambda: Scorer(examples).score(predictions))
    scorer = Scorer(examples)
    scorer.score(predictions)
    # New prediction lists each time (the same predictions in another order): nothing of a scoring is reused.
    rotated = [predictions[k:] + predictions[:k] for k in range(1, repeats + 1)]
    rescoring = min(timed(lambda p=p: scorer.score(p))[0] for p in rotated)
    ref_examples, ref_predictions = read_reference_inputs(str(examples_path), str(predictions_path))
    reference, _ = timed(lambda: reference_scores(ref_examples, ref_predictions))
    shutil.rmtree(work / "cache-in-process", ignore_errors=True)
    return {"cold": cold, "warm cache": warm_cache, "rescoring": rescoring, "reference": reference}


def ratio_line(
    label: str, reference: float, ours: float, target: float | None, paired: list[float] | None = None
) -> str:
    """One ratio of medians, to two decimals (a "2.0x" that misses 2x must not be printed), with its verdict and,
    when given, the range of the repeats' own ratios."""
    ratio = reference / ours
    mark = "" if target is None else f"  (target ≥ {target}x: {'OK' if ratio >= target else 'MISSED'})"
    spread = f"  repeats {min(paired):.2f}-{max(paired):.2f}x" if paired else ""
    return f"    {label:<34} {ours:8.2f} s vs reference {reference:8.2f} s = {ratio:5.2f}x{mark}{spread}"


def report(name: str, n: int, whole: dict, inproc: dict | None) -> None:
    print(f"\n== {name}: {n} examples ==", flush=True)
    print("  whole process (median wall, CPU incl. workers, peak RSS):")
    for kind in ("cold", "reference", "warm cache", "warm corpus"):
        if kind in whole:
            w = whole[kind]
            print(f"    {kind:<12} {w['wall']:8.2f} s wall {w['cpu']:8.2f} s CPU {w['peak_gib']:6.2f} GiB peak")
    if "reference" in whole:
        ref = whole["reference"]
        for kind in ("cold", "warm cache", "warm corpus"):
            target = TARGETS.get(kind) if name.startswith("6k") else None
            print(ratio_line(f"{kind} (wall)", ref["wall"], whole[kind]["wall"], target, whole["paired"][kind]))
            print(ratio_line(f"{kind} (CPU)", ref["cpu"], whole[kind]["cpu"], None))
        print(f"    overall F1 shambench {whole['shambench_f1']}  reference {whole['reference_f1']}")
    limit = MEMORY_TARGETS.get(n)
    if limit is not None:
        peak = max(whole[kind]["peak_gib"] for kind in ("cold", "warm cache", "warm corpus"))
        print(f"    peak memory {peak:.2f} GiB (target ≤ {limit} GiB: {'OK' if peak <= limit else 'MISSED'})")
    if inproc:
        print("  in process (wall):")
        for kind in ("cold", "warm cache", "rescoring"):
            target = TARGETS[kind] if kind == "rescoring" else None
            print(ratio_line(kind, inproc["reference"], inproc[kind], target))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="6k,60k", help=f"Comma-separated, from {', '.join(SIZES)} or numbers.")
    parser.add_argument("--variants", default="repeated,unique", help="repeated, unique or both.")
    parser.add_argument("--repeats", type=int, default=3, help="Alternating whole-process repeats (medians).")
    parser.add_argument("--reference-max", type=int, default=200_000, help="Largest size the reference runs at.")
    parser.add_argument("--in-process-max", type=int, default=60_000, help="Largest size timed in process.")
    parser.add_argument("--data-dir", default=str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--reference", nargs=2, metavar=("EXAMPLES", "PREDICTIONS"), help=argparse.SUPPRESS)
    parser.add_argument("--measure", metavar="REPORT", help=argparse.SUPPRESS)
    parser.add_argument("command", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        measure_main(args.measure, args.command)
        return
    if args.reference:
        reference_main(*args.reference)
        return

    print(f"{os.cpu_count()} cores, load average {os.getloadavg()} at start", flush=True)
    base = real_examples(args.data_dir)
    print(f"{len(base)} real test responses from {args.data_dir}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="bench_score."))
    try:
        for size_name in args.sizes.split(","):
            n = SIZES.get(size_name.lower())
            n = len(base) if n == 0 else n or int(size_name)
            for variant in args.variants.split(","):
                if n == len(base) and variant == "unique":
                    continue  # the real responses are the unique variant at this size
                name = f"{size_name} {variant}" if n != len(base) else "6k real"
                folder = work / name.replace(" ", "-")
                folder.mkdir()
                paths = write_corpus(base, n, variant == "unique", folder, args.seed)
                whole = whole_process(*paths, folder, args.repeats, n <= args.reference_max)
                inproc = in_process(*paths, folder, args.repeats) if n <= args.in_process_max else None
                report(name, n, whole, inproc)
                shutil.rmtree(folder, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\nload average {os.getloadavg()} at the end", flush=True)


if __name__ == "__main__":
    main()
