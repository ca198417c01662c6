"""Speed of the SHAM-Bench scorer on a seeded synthetic corpus, cold (segmenting) and warm (rescoring).

    .venv/bin/python benchmarks/bench_score.py [--examples 10000] [--seed 0] [--repeats 3]

The corpus mimics the benchmark: about 100 words per response in sentences of 8-20 words, and about 45% of the
responses carrying 1-3 gold spans of 2-12 words. Predictions are fresh random spans of the same density.
Cold = building a `Scorer` with the segmentation cache cleared, then scoring; warm = scoring new predictions with
the same `Scorer` (bootstrap intervals included). Both are scaled to the benchmark's ~6,500 responses and
compared with the targets: cold under 3 s, warm under 0.2 s on a 2-core machine.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from shambench.schema import Example, Prediction, Span
from shambench.scorer import Scorer
from shambench.text import clear_cache

BENCHMARK_RESPONSES = 6500
TARGET_COLD_S = 3.0
TARGET_WARM_S = 0.2
SPAN_SHARE = 0.45
TASKS = (("summ", "ragtruth"), ("summ", "zhou"), ("context_qa", "ragtruth"), ("open_qa", "mushroom"), ("mt", "zhou"))


def vocabulary(rng: np.random.Generator, size: int = 5000) -> np.ndarray:
    """Pseudo-words of 2-10 letters, a few capitalised and a few numeric, like running text."""
    letters = np.array(list("etaoinshrdlucmfwypvbgkjqxz"))
    weights = np.linspace(2.0, 0.1, len(letters))
    weights /= weights.sum()
    words = []
    for i in range(size):
        word = "".join(rng.choice(letters, size=rng.integers(2, 11), p=weights))
        if i % 17 == 0:
            word = word.capitalize()
        elif i % 29 == 0:
            word = str(rng.integers(1, 10_000))
        words.append(word)
    return np.array(words)


def response_words(rng: np.random.Generator, vocab: np.ndarray, n_words: int) -> tuple[str, list[tuple[int, int]]]:
    """A response of about `n_words` words in sentences, and the character bounds of each word."""
    parts: list[str] = []
    bounds = []
    pos = 0
    left = n_words
    while left > 0:
        length = min(left, int(rng.integers(8, 21)))
        for j, w in enumerate(rng.choice(vocab, size=length)):
            word = w.capitalize() if j == 0 else w
            if j == length - 1:
                word += "."
            elif rng.random() < 0.08:
                word += ","
            sep = "" if not parts else " "
            parts.append(sep + word)
            bounds.append((pos + len(sep), pos + len(sep) + len(word)))
            pos += len(sep) + len(word)
        left -= length
    return "".join(parts), bounds


def random_spans(rng: np.random.Generator, bounds: list[tuple[int, int]]) -> list[Span]:
    """With probability SPAN_SHARE, 1-3 spans of 2-12 consecutive words; otherwise none."""
    if rng.random() >= SPAN_SHARE:
        return []
    spans = []
    for _ in range(int(rng.integers(1, 4))):
        width = int(rng.integers(2, 13))
        first = int(rng.integers(0, max(1, len(bounds) - width)))
        last = min(len(bounds), first + width) - 1
        spans.append(Span(start=bounds[first][0], end=bounds[last][1]))
    return spans


def synthetic_corpus(n: int, seed: int) -> tuple[list[Example], list[list[tuple[int, int]]]]:
    """`n` examples spread over five partitions, and each response's word bounds (for making predictions)."""
    rng = np.random.default_rng(seed)
    vocab = vocabulary(rng)
    examples, all_bounds = [], []
    for i in range(n):
        text, bounds = response_words(rng, vocab, int(rng.integers(80, 121)))
        task, dataset = TASKS[i % len(TASKS)]
        examples.append(
            Example(id=f"syn/{i}", dataset=dataset, task=task, response=text, hallu_spans=random_spans(rng, bounds))
        )
        all_bounds.append(bounds)
    return examples, all_bounds


def synthetic_predictions(examples, all_bounds, seed: int) -> list[Prediction]:
    """One random prediction per example, with the same span density as the gold."""
    rng = np.random.default_rng(seed)
    return [Prediction(id=ex.id, spans=random_spans(rng, b)) for ex, b in zip(examples, all_bounds)]


def timed(fn):
    """`(wall seconds, CPU seconds of this process, result)` of one call."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - t0, time.process_time() - c0, out


def verdict(label: str, wall: float, cpu: float, n: int, target: float) -> str:
    """One line: throughput and the wall time scaled to the benchmark's size, against its target.

    CPU time is printed beside it because on a shared machine other processes stretch the wall time.
    """
    scaled = wall * BENCHMARK_RESPONSES / n
    mark = "OK" if scaled < target else "MISSED"
    return (
        f"{label:<24} {wall:6.3f} s wall ({cpu:6.3f} s CPU) {n / wall:9.0f} examples/s   "
        f"{scaled:6.3f} s per {BENCHMARK_RESPONSES} (target < {target} s) {mark}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=10_000, help="Synthetic examples to score.")
    parser.add_argument("--seed", type=int, default=0, help="Seed of the synthetic corpus.")
    parser.add_argument("--repeats", type=int, default=3, help="Warm rescorings to time (the best is reported).")
    parser.add_argument("--bootstrap", type=int, default=1000, help="Bootstrap resamples.")
    args = parser.parse_args()

    examples, bounds = synthetic_corpus(args.examples, args.seed)
    words = sum(len(b) for b in bounds) / len(bounds)
    with_spans = sum(bool(ex.hallu_spans) for ex in examples) / len(examples)
    print(f"synthetic corpus: {len(examples)} examples, {words:.0f} words/response, {with_spans:.0%} with spans")
    # Load spaCy and numpy code paths outside the timings, on a text that is not in the corpus.
    Scorer([Example(id="warm-up", dataset="d", task="t", response="A warm-up.")], n_resamples=10).score([])

    preds = synthetic_predictions(examples, bounds, args.seed + 1)

    def cold():
        clear_cache()
        return Scorer(examples, n_resamples=args.bootstrap).score(preds)

    # Timed once: a second run would find spaCy's own tokenizer cache and vocabulary already filled.
    cold_wall, cold_cpu, results = timed(cold)
    scorer = Scorer(examples, n_resamples=args.bootstrap)
    scorer.score(preds)  # the first call draws the bootstrap weights; rescoring reuses them
    fresh = [synthetic_predictions(examples, bounds, args.seed + 2 + k) for k in range(args.repeats)]
    warm_wall, warm_cpu, _ = min((timed(lambda p=p: scorer.score(p)) for p in fresh), key=lambda t: t[0])
    print(verdict("cold (segment + score)", cold_wall, cold_cpu, len(examples), TARGET_COLD_S))
    print(verdict("warm (rescore)", warm_wall, warm_cpu, len(examples), TARGET_WARM_S))
    print(f"overall token F1 of the random predictions: {results.overall.token.f1:.3f}")


if __name__ == "__main__":
    main()
