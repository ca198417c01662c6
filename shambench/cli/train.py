"""`shambench train`: fine-tune detectors on the unified data."""

from __future__ import annotations

from typing import Any

import click

from shambench.cli.options import OutputFolder, data_dir_option


@click.group("train")
def train_group() -> None:
    """Fine-tune a detector on the benchmark's non-test data (needs `pip install 'shambench[models]'`)."""


@train_group.command("token-classifier")
@click.option("--base", required=True, metavar="MODEL", help="Base model: a local folder or a Hugging Face hub id.")
@click.option(
    "--train",
    "datasets",
    metavar="DATASETS",
    help="Comma-separated adapters whose non-test labelled splits are trained on (see `shambench list datasets`).",
)
@click.option(
    "--examples",
    "examples_file",
    type=click.Path(dir_okay=False),
    help="An EXAMPLES JSONL file to train on (all of it), instead of or beside --train.",
)
@click.option(
    "--out",
    required=True,
    type=OutputFolder(),
    help="Output folder for model and reports.",
)
@data_dir_option
@click.option("--limit", type=click.IntRange(min=2), help="Train on at most N examples (seeded sample).")
@click.option(
    "--input-format",
    default="lettucedetect",
    show_default=True,
    type=click.Choice(["lettucedetect", "psiloqa"]),
    help="Prompt layout (the detector reads it back from the output folder).",
)
@click.option("--max-length", default=512, show_default=True, type=click.IntRange(min=16), help="Tokens per window.")
@click.option("--epochs", default=1, show_default=True, type=click.IntRange(min=1))
@click.option("--batch-size", default=8, show_default=True, type=click.IntRange(min=1), help="Windows per step.")
@click.option("--lr", "learning_rate", default=5e-5, show_default=True, type=click.FloatRange(min=0, min_open=True))
@click.option(
    "--positive-weight",
    default=1.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Loss weight of hallucinated tokens (1 = plain cross-entropy, as LettuceDetect).",
)
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of shuffling, held-out split and init.")
@click.option(
    "--holdout",
    default=0.1,
    show_default=True,
    type=click.FloatRange(0, 1, max_open=True),
    help="Share of prompt groups held out and reported on (0 = none).",
)
@click.option(
    "--attention-dropout",
    default="0",
    show_default=True,
    metavar="P|keep",
    help="Attention dropout during training; `keep` leaves the base model's value. On CPU it dominates step time.",
)
@click.option("--threshold", default=0.5, show_default=True, type=click.FloatRange(0, 1), help="Detector threshold.")
@click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda, cuda:N or mps.")
@click.option("--no-progress", is_flag=True, help="Do not show the progress bar.")
def token_classifier(no_progress: bool, attention_dropout: str, datasets: str | None, **opts: Any) -> None:
    """Fine-tune a token classifier with LettuceDetect-style labels on answer tokens.

    \b
    shambench train token-classifier --base answerdotai/ModernBERT-base --train ragtruth --out models/rt
    shambench train token-classifier --base ./minilm --examples train.jsonl --out models/mine --epochs 2

    Writes the model (safetensors), checkpoints/epoch-N/, train_config.json and holdout.json (the held-out
    scores of the model and of the `random` baseline). Evaluate it with
    `shambench eval --detector token-classifier:OUT`.
    """
    from shambench.cli.progress import counting_progress
    from shambench.data.benchmark import split_names
    from shambench.detection.detector import trainers
    from shambench.reporting.console import make_console

    # Training belongs to the token-classifier detector family; the registry imports it only now.
    training = trainers.get("token-classifier").factory()
    try:
        dropout = None if attention_dropout == "keep" else float(attention_dropout)
    except ValueError:
        raise click.BadParameter("expected a probability or `keep`", param_hint="--attention-dropout") from None
    config = training.TrainConfig(datasets=split_names(datasets), attention_dropout=dropout, **opts)
    console = make_console()
    progress = counting_progress(not no_progress)
    task = progress.add_task("training", total=None, stats="")

    def on_step(step: int, total: int, loss: float, epoch: int) -> None:
        progress.update(task, completed=step, total=total, stats=f"epoch={epoch} loss={loss:.4f}")

    with progress:
        summary = training.train_token_classifier(config, on_step)
    console.print(f"trained on {summary.n_train} examples in {summary.steps} steps; model: {summary.out}")
    if summary.holdout_f1 is not None:
        console.print(
            f"held-out token F1 (per-example mean) on {summary.n_holdout} examples: "
            f"model {summary.holdout_f1:.3f}, random {summary.random_f1:.3f}, no prediction {summary.none_f1:.3f}  "
            f"(details: {summary.out}/holdout.json)"
        )
