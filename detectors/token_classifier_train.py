"""Fine-tuning a token classifier on the unified data (`shambench train token-classifier`).

Labels follow LettuceDetect: every response token that overlaps a gold hallucinated span by a character is 1,
every other response token 0, and prompt and special tokens -100 (ignored by the loss). Inputs are built by the
same code the `token-classifier` detector uses (`detectors.token_classifier`), so a model sees at training
time exactly the layout it is scored on. A response that does not fit beside its prompt is split into windows
as at inference; the prompt is truncated to the room left (as LettuceDetect's `truncation="only_first"`), since
a context window without the evidence would teach the model to flag supported tokens.

Examples sharing a prompt (RAGTruth's six responses per source) stay on the same side of the held-out split, so
the held-out report measures responses to unseen sources. The output folder holds the final model
(safetensors), its tokenizer, `shambench.json` (input format, max length, threshold for the detector),
`train_config.json`, `checkpoints/epoch-N/`, and `holdout.json` (the scorer's results for the model and for the
seeded `random` baseline and of predicting nothing on the held-out examples).
"""

from __future__ import annotations

import hashlib
import math
import random
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from pydantic import Field

import shambench.fs as fs
from shambench.detection.detector import trainer
from shambench.errors import DataError
from shambench.io import write_json
from shambench.schema import Example, Model, Name, Prediction, Span

ATTENTION_DROPOUT_KEYS = ("attention_dropout", "attention_probs_dropout_prob")
"""Config attributes that hold attention dropout (ModernBERT/Llama-style, BERT/RoBERTa-style)."""


class TrainConfig(Model):
    """Everything that defines a training run, written to `train_config.json` in the output folder."""

    base: str
    """Base model: a local folder or a Hugging Face hub id (a new two-label head is added when it has none)."""
    out: str
    """Output folder for the model, checkpoints and reports."""
    datasets: list[Name] | None = None
    """Adapters whose non-test labelled splits are used."""
    examples_file: str | None = None
    """An EXAMPLES JSONL file used whole, instead of or beside the adapters."""
    data_dir: str | None = None
    """Data directory the adapters read."""
    limit: int | None = None
    """Use at most this many examples (after a seeded shuffle), for quick runs."""
    input_format: str = "lettucedetect"
    """Prompt layout, one of `detectors.token_classifier.INPUT_FORMATS`."""
    max_length: int = 512
    """Tokens per input window, special tokens included."""
    epochs: int = Field(default=1, ge=1)
    """Passes over the training examples."""
    batch_size: int = Field(default=8, ge=1)
    """Windows per optimiser step."""
    learning_rate: float = Field(default=5e-5, gt=0)
    """Peak AdamW learning rate (linear warm-up over the first 10% of steps, then linear decay)."""
    weight_decay: float = 0.01
    """AdamW weight decay."""
    positive_weight: float = Field(default=1.0, gt=0)
    """Loss weight of hallucinated tokens relative to supported ones (1 = LettuceDetect's plain cross-entropy);
    hallucinated tokens are rare, so small training sets learn to flag nothing without it."""
    seed: int = 0
    """Seed of the shuffle, the held-out split, the head initialisation and dropout."""
    holdout: float = Field(default=0.1, ge=0.0, lt=1.0)
    """Share of prompt groups kept out of training and reported on."""
    attention_dropout: float | None = 0.0
    """Attention dropout of the base model; None keeps the base config's value (it dominates CPU step time)."""
    threshold: float = Field(default=0.5, ge=0.0, le=1.0)
    """Probability threshold recorded for the detector."""
    device: str = "auto"
    """Torch device: auto, cpu, cuda, cuda:N or mps."""


class TrainSummary(Model):
    """What a training run produced."""

    out: str
    """Output folder."""
    n_train: int
    """Training examples."""
    n_holdout: int
    """Held-out examples."""
    steps: int
    """Optimiser steps taken."""
    final_loss: float | None
    """Mean loss over the last epoch."""
    holdout_f1: float | None = None
    """Held-out token F1 of the model (per-example mean, the SHAM-Bench convention)."""
    random_f1: float | None = None
    """Held-out token F1 of the seeded `random` baseline on the same examples."""
    none_f1: float | None = None
    """Held-out token F1 of predicting nothing (high under the per-example convention: clean examples score 1)."""


def training_examples(config: TrainConfig) -> list[Example]:
    """The examples to train on: every non-test labelled split of the adapters, plus the EXAMPLES file."""
    from shambench.data.adapter import adapters, resolve_data_dir
    from shambench.records import read_examples

    examples: list[Example] = []
    root = resolve_data_dir(config.data_dir)
    for name in config.datasets or []:
        adapter = adapters.get(name).factory()
        splits = [s for s in adapter.splits if s != "test"]
        if not splits:
            raise DataError(f"{name} releases no labelled split besides test; there is nothing to train on")
        if not adapter.available(root):
            raise DataError(f"{adapter.root(root)}: source files not found (pass --data-dir)")
        for split in splits:
            examples.extend(adapter.load(root, split).examples)
    if config.examples_file:
        examples.extend(read_examples(config.examples_file))
    if not examples:
        raise DataError("no training examples (give --train DATASETS or --examples FILE)")
    if config.limit:
        examples = random.Random(config.seed).sample(examples, min(config.limit, len(examples)))
    return examples


def _group_key(example: Example) -> str:
    return hashlib.sha256(f"{example.dataset}\0{example.question}\0{example.context}".encode()).hexdigest()


def split_holdout(examples: Sequence[Example], share: float, seed: int) -> tuple[list[Example], list[Example]]:
    """Training and held-out examples; examples with the same dataset, question and context share a side."""
    keys = sorted({_group_key(ex) for ex in examples})
    random.Random(seed).shuffle(keys)
    n_held = math.ceil(len(keys) * share) if share > 0 else 0
    if share > 0 and n_held >= len(keys):
        raise DataError(f"{len(keys)} prompt group(s) are too few to hold out {share:.0%} and still train")
    held = set(keys[:n_held])
    train = [ex for ex in examples if _group_key(ex) not in held]
    return train, [ex for ex in examples if _group_key(ex) in held]


def token_labels(offsets: np.ndarray, spans: Sequence[Span]) -> np.ndarray:
    """1 for tokens overlapping a span by at least one character, else 0 (zero-width tokens are 0)."""
    labels = np.zeros(len(offsets), dtype=np.int64)
    for span in spans:
        labels |= (offsets[:, 0] < span.end) & (offsets[:, 1] > span.start) & (offsets[:, 1] > offsets[:, 0])
    return labels


def training_windows(
    tokenizer: Any, template: Any, example: Example, input_format: str, max_length: int
) -> list[tuple[list[int], list[int] | None, list[int]]]:
    """`(input_ids, token_type_ids, labels)` for each window of one example (first prompt window only)."""
    from shambench.detectors.token_classifier import Encoded, plan_windows, prompt_of

    enc = Encoded(tokenizer, [prompt_of(example, input_format)], example.response)
    gold = token_labels(enc.offsets, example.hallu_spans)
    out, seen = [], set()
    for _, p_hi, a_lo, a_hi in plan_windows(
        len(enc.prompt_ids[0]), len(enc.answer_ids), max_length - template.n_special, 0
    ):
        if (a_lo, a_hi) in seen:
            continue
        seen.add((a_lo, a_hi))
        room = max_length - template.n_special - (a_hi - a_lo)
        ids, types, at = template.build(enc.prompt_ids[0][: min(p_hi, room)], enc.answer_ids[a_lo:a_hi])
        labels = [-100] * len(ids)
        labels[at : at + a_hi - a_lo] = gold[a_lo:a_hi].tolist()
        out.append((ids, types, labels))
    return out


def load_base(config: TrainConfig) -> tuple[Any, Any]:
    """Tokenizer and a two-label token-classification model from the base, with the chosen attention dropout."""
    from transformers import AutoConfig, AutoModelForTokenClassification, AutoTokenizer

    from shambench.detectors._models import load_pretrained

    tokenizer = load_pretrained(AutoTokenizer, config.base, "tokenizer")
    model_config = load_pretrained(AutoConfig, config.base, "model config")
    model_config.num_labels = 2
    model_config.id2label = {0: "supported", 1: "hallucinated"}
    model_config.label2id = {"supported": 0, "hallucinated": 1}
    if config.attention_dropout is not None:
        for key in ATTENTION_DROPOUT_KEYS:
            if hasattr(model_config, key):
                setattr(model_config, key, config.attention_dropout)
    model = load_pretrained(
        AutoModelForTokenClassification,
        config.base,
        "base model",
        config=model_config,
        use_safetensors=True,
        ignore_mismatched_sizes=True,
    )
    return tokenizer, model


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch."""
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def save_model(model: Any, tokenizer: Any, folder: Path, config: TrainConfig) -> None:
    """Weights as safetensors, the tokenizer, and the detector settings beside them."""
    # Confined to the output folder's parent: the output folder and its checkpoints are never links followed.
    root = Path(config.out).absolute().parent
    fs.make_dirs(folder, root)
    # The libraries' own writers (allowed in tests/test_fs_gate.py) follow links: they write into a new folder the
    # gate made (no link can be in it), and the gate renames each file into place, refusing a link where it goes.
    staged = fs.new_dir(folder, root, prefix=".saving-")
    try:
        model.save_pretrained(staged, safe_serialization=True)
        tokenizer.save_pretrained(staged)
        for name in fs.entries(staged, root):
            fs.rename(staged / name, folder / name, root)
    finally:
        fs.remove_empty_dir(staged, root)
    from shambench.detectors.token_classifier import SETTINGS_FILE

    write_json(
        folder / SETTINGS_FILE,
        {
            "input_format": config.input_format,
            "max_length": config.max_length,
            "threshold": config.threshold,
            # the windows above carry the tokenizer's token types, so inference must send them too
            "token_types": True,
        },
        root,
    )


StepCallback = Callable[[int, int, float, int], None]
"""Called after each optimiser step with (step, total steps, recent mean loss, epoch)."""


def train_token_classifier(config: TrainConfig, on_step: StepCallback | None = None) -> TrainSummary:
    """Fine-tune, checkpoint each epoch, save the final model and write the held-out report."""
    import torch
    from transformers import get_linear_schedule_with_warmup

    from shambench.detectors._models import PairTemplate, pad_batch, pick_device

    out = Path(config.out)
    write_json(out / "train_config.json", config)
    seed_everything(config.seed)
    train, held = split_holdout(training_examples(config), config.holdout, config.seed)
    device = pick_device(config.device)
    tokenizer, model = load_base(config)
    model.to(device)
    template = PairTemplate.of(tokenizer)
    windows = [
        w for ex in train for w in training_windows(tokenizer, template, ex, config.input_format, config.max_length)
    ]
    steps_per_epoch = math.ceil(len(windows) / config.batch_size)
    total = steps_per_epoch * config.epochs
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay)
    schedule = get_linear_schedule_with_warmup(optimizer, math.ceil(0.1 * total), total)
    order_rng = random.Random(config.seed)
    pad_id = tokenizer.pad_token_id or 0
    class_weights = torch.tensor([1.0, config.positive_weight], device=device)
    step, epoch_loss = 0, None
    model.train()
    for epoch in range(1, config.epochs + 1):
        order = list(range(len(windows)))
        order_rng.shuffle(order)
        losses = []
        for lo in range(0, len(order), config.batch_size):
            rows = [windows[i] for i in order[lo : lo + config.batch_size]]
            batch = pad_batch([(ids, types) for ids, types, _ in rows], pad_id, device)
            labels = pad_batch([(labels, None) for _, _, labels in rows], -100, device)["input_ids"]
            logits = model(**batch).logits
            loss = torch.nn.functional.cross_entropy(
                logits.view(-1, logits.shape[-1]).float(), labels.view(-1), weight=class_weights, ignore_index=-100
            )
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            losses.append(loss.item())
            step += 1
            if on_step:
                on_step(step, total, float(np.mean(losses[-20:])), epoch)
        epoch_loss = float(np.mean(losses)) if losses else None
        save_model(model, tokenizer, out / "checkpoints" / f"epoch-{epoch}", config)
    model.eval()
    save_model(model, tokenizer, out, config)
    summary = TrainSummary(out=str(out), n_train=len(train), n_holdout=len(held), steps=step, final_loss=epoch_loss)
    if held:
        summary.holdout_f1, summary.random_f1, summary.none_f1 = holdout_report(out, held, config)
    return summary


def holdout_report(out: Path, held: Sequence[Example], config: TrainConfig) -> tuple[float, float, float]:
    """Score the saved model, the `random` baseline and no prediction on the held-out examples; write
    `holdout.json`; return the three token F1s."""
    from shambench.detectors.baselines import RandomDetector
    from shambench.detectors.token_classifier import make_token_classifier
    from shambench.scoring.scorer import Scorer

    scorer = Scorer(held, n_resamples=200, seed=config.seed)
    detector = make_token_classifier(str(out), {}, device=config.device)
    model_results = scorer.score(list(detector.predict(held)))
    random_results = scorer.score(list(RandomDetector(seed=config.seed).predict(held)))
    none_results = scorer.score([Prediction(id=ex.id) for ex in held])
    write_json(
        out / "holdout.json",
        {
            "convention": "token F1 per example, averaged over the held-out examples (SHAM-Bench); the random "
            "baseline flags each token with probability 0.1, seeded; none predicts no span",
            "model": model_results.model_dump(mode="json"),
            "random": random_results.model_dump(mode="json"),
            "none": none_results.model_dump(mode="json"),
        },
    )
    return mean_token_f1(model_results), mean_token_f1(random_results), mean_token_f1(none_results)


def mean_token_f1(results: Any) -> float:
    """The example-weighted mean token F1 over the datasets of a `Results` (the per-example mean overall)."""
    groups = results.partitions.values()
    return float(sum(g.token.f1 * g.n for g in groups) / max(1, sum(g.n for g in groups)))


@trainer("token-classifier")
def token_classifier_trainer() -> ModuleType:
    """Fine-tuning a token classifier on non-test data (`shambench train token-classifier`)."""
    return sys.modules[__name__]
