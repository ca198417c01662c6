"""How each stage's cost grows with its input: time and peak memory at 1x, 10x and 100x on synthetic data.

    .venv/bin/python benchmarks/bench_growth.py [--scale 1] [--stages items,spans,annotators,agreement,apart,locate,lines]

Stages and their input (the 1x size, times --scale):
- `cold`: the scorer (`Scorer(examples).score(predictions)`, 100 resamples) over 100 examples of four sentences,
  each run with an empty cache folder (segmentation included);
- `items`: the same with the segmentation the warm-up run cached (the scorer's own work);
- `spans`: the scorer on one response of 50 sentences with a predicted span on each of them (spans per prediction);
- `annotators`: `Annotations.leave_one_out` with 2 annotators of one example, 3 spans each at random in 1,000
  characters, Mu-SHROOM's rule (the majority of the others and their shares per character; 100x is 200: more than
  MAX_ANNOTATORS = 256 is refused);
- `agreement`: the human agreement of one item of 1,000 characters read by 2 annotators as in `annotators`, soft
  labels included (`Scorer([item]).agreement()`: the leave-one-out rows scored, IoU and Cor);
- `apart`: `annotators` with the union rule and every annotator's 3 spans apart from everyone else's, the worst case
  for the readings' lists (each holds the others' 3 x (annotators - 1) pieces);
- `locate`: placing 20 quoted strings (case changed, so the normalized pass runs) in a response of 20 sentences;
- `lines`: `read_examples` of an EXAMPLES file of 1,000 lines.

Time is CPU time of this process (a shared machine's wall time says more about the others), with segmentation in
this process (`$SHAMBENCH_SEGMENT_WORKERS=1`) and the command line's process settings (the collector paused while
files are read: `shambench.memory`); peak memory is tracemalloc's peak of a second run (tracemalloc slows the run,
so it is not timed). A linear stage shows a time
ratio near 10 from 1x to 10x and from 10x to 100x (fixed costs make the first smaller); a quadratic one near 100.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from shambench.cli.process import CommandLineSettings  # noqa: E402
from shambench.detection.locate import locate  # noqa: E402
from shambench.memory import use_process_settings  # noqa: E402
from shambench.paths import CACHE_ENV  # noqa: E402
from shambench.records import read_examples  # noqa: E402
from shambench.schema import (  # noqa: E402
    Annotations,
    Example,
    MarkedByMoreThan,
    Prediction,
    SoftSpan,
    Span,
    covered_shares,
)
from shambench.scoring.scorer import Scorer  # noqa: E402
from shambench.scoring.text import WORKERS_ENV  # noqa: E402

FACTORS = (1, 10, 100)
WORDS = [
    "the",
    "river",
    "basin",
    "covers",
    "about",
    "four",
    "thousand",
    "square",
    "miles",
    "and",
    "its",
    "mayor",
    "was",
    "elected",
    "in",
    "nineteen",
]


def sentence(rng: random.Random, i: int) -> str:
    """A sentence of ten words and a number, different for each `i`."""
    return " ".join(rng.choice(WORDS) for _ in range(10)).capitalize() + f" {i}."


def example(i: int, sentences: int, rng: random.Random) -> Example:
    """An example of `sentences` sentences with a gold span on every third."""
    parts = [sentence(rng, j) for j in range(sentences)]
    response, spans, at = "", [], 0
    for j, part in enumerate(parts):
        if j % 3 == 0:
            spans.append(Span(start=at, end=at + len(part)))
        response += part + " "
        at += len(part) + 1
    return Example(id=f"e{i}", task="summ", dataset="synthetic", split="test", response=response, hallu_spans=spans)


def spans_of(ex: Example, every: int) -> list[Span]:
    """A predicted span on every `every`-th sentence of an example."""
    bounds, at = [], 0
    for part in ex.response.split(". ")[:-1]:
        bounds.append((at, at + len(part) + 1))
        at += len(part) + 2
    return [Span(start=a, end=b) for a, b in bounds[::every]]


def items_stage(n: int) -> Callable[[], object]:
    rng = random.Random(0)
    examples = [example(i, 4, rng) for i in range(n)]
    preds = [Prediction(id=ex.id, spans=spans_of(ex, 2)) for ex in examples]
    return lambda: Scorer(examples, n_resamples=100).score(preds)


def cold_stage(n: int, folder: Path) -> Callable[[], object]:
    # One set of examples per run (the warm-up and the two measured), each of texts the others do not have, scored
    # with an empty cache folder: nothing of an earlier run's segmentation is reused.
    sets = []
    for k in range(3):
        rng = random.Random(k)
        examples = [example(i, 4, rng) for i in range(n)]
        examples = [ex.model_copy(update={"response": ex.response + f"Run {k}."}) for ex in examples]
        sets.append((examples, [Prediction(id=ex.id, spans=spans_of(ex, 2)) for ex in examples]))
    runs = iter(range(3))

    def run() -> object:
        k = next(runs)
        os.environ[CACHE_ENV] = str(folder / f"cache-{n}-{k}")
        return Scorer(sets[k][0], n_resamples=100).score(sets[k][1])

    return run


def spans_stage(n: int) -> Callable[[], object]:
    rng = random.Random(0)
    ex = example(0, n, rng)
    pred = Prediction(id=ex.id, spans=spans_of(ex, 1))
    return lambda: Scorer([ex], n_resamples=100).score([pred])


def annotators_stage(n: int) -> Callable[[], object]:
    rng = random.Random(0)
    marked = {}
    for a in range(n):
        starts = sorted(rng.sample(range(0, 1000, 10), 3))
        marked[f"a{a}"] = [Span(start=s, end=s + rng.randint(3, 30)) for s in starts]
    return lambda: Annotations.leave_one_out(marked, MarkedByMoreThan(share=0.5), "majority", soft=True)


def agreement_stage(n: int) -> Callable[[], object]:
    rng = random.Random(0)
    response = " ".join(sentence(rng, j) for j in range(20))[:1000]
    marked = {}
    for a in range(n):
        starts = sorted(rng.sample(range(0, 960, 10), 3))
        marked[f"a{a}"] = [Span(start=s, end=s + rng.randint(3, 30)) for s in starts]
    rule = MarkedByMoreThan(share=0.5)
    item = Example(
        id="item",
        task="open_qa",
        dataset="synthetic",
        response=response,
        hallu_spans=rule(list(marked.values())),
        soft_spans=[SoftSpan(start=a, end=b, prob=p) for a, b, p in covered_shares(list(marked.values()))],
        annotations=Annotations.leave_one_out(marked, rule, "majority", soft=True),
    )
    return lambda: Scorer([item], n_resamples=100).agreement()


def apart_stage(n: int) -> Callable[[], object]:
    marked = {f"a{a}": [Span(start=(3 * a + k) * 20, end=(3 * a + k) * 20 + 10) for k in range(3)] for a in range(n)}
    return lambda: Annotations.leave_one_out(marked, MarkedByMoreThan(share=0.0), "union")


def locate_stage(n: int) -> Callable[[], object]:
    rng = random.Random(0)
    parts = [sentence(rng, j) for j in range(n)]
    response = " ".join(parts)
    quotes = [p.upper() for p in parts]
    return lambda: locate(response, quotes)


def lines_stage(n: int, folder: Path) -> Callable[[], object]:
    rng = random.Random(0)
    path = folder / f"examples-{n}.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(json.dumps(example(i, 4, rng).model_dump(mode="json", exclude_defaults=True)) + "\n")
    return lambda: read_examples(path)


BASES = {
    "cold": 100,
    "items": 100,
    "spans": 50,
    "annotators": 2,
    "agreement": 2,
    "apart": 2,
    "locate": 20,
    "lines": 1000,
}


def measure(run: Callable[[], object]) -> tuple[float, int]:
    """CPU seconds of one run, then tracemalloc's peak bytes of another."""
    start = time.process_time()
    run()
    cpu = time.process_time() - start
    tracemalloc.start()
    run()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return cpu, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies every 1x size")
    parser.add_argument("--stages", default=",".join(BASES), help="comma-separated, of " + ", ".join(BASES))
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'stage':<11} {'size':>8} {'CPU s':>9} {'peak MB':>9} {'time x':>7} {'mem x':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ[CACHE_ENV] = str(Path(tmp) / "cache")  # never the user's cache
        os.environ[WORKERS_ENV] = "1"
        use_process_settings(CommandLineSettings())
        for stage in args.stages.split(","):
            previous = None
            for factor in FACTORS:
                size = max(1, round(BASES[stage] * args.scale * factor))
                make = STAGES[stage]
                run = make(size, Path(tmp)) if stage in ("cold", "lines") else make(size)
                run()  # warm: imports, caches of the process
                cpu, peak = measure(run)
                ratios = ("", "") if previous is None else (f"{cpu / previous[0]:.1f}", f"{peak / previous[1]:.1f}")
                print(f"{stage:<11} {size:>8} {cpu:>9.4f} {peak / 1e6:>9.2f} {ratios[0]:>7} {ratios[1]:>7}")
                previous = (max(cpu, 1e-6), max(peak, 1))


STAGES: dict[str, Callable] = {
    "cold": cold_stage,
    "items": items_stage,
    "spans": spans_stage,
    "annotators": annotators_stage,
    "agreement": agreement_stage,
    "apart": apart_stage,
    "locate": locate_stage,
    "lines": lines_stage,
}

if __name__ == "__main__":
    main()
