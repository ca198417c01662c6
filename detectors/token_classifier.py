"""Token classifiers: LettuceDetect, PsiloQA and the models `shambench train token-classifier` writes.

A transformers token-classification model reads a pair `(prompt, response)` and labels every response token
supported (0) or hallucinated (1). The prompt is built in the model's own input format (`INPUT_FORMATS`).

Long inputs are windowed, never truncated: the response's tokens are all scored. When prompt and response do
not fit in `max_length`, the prompt is cut into overlapping token windows, each paired with the whole response
(or, for a response longer than half the budget, with overlapping response windows). A response token's
probability is reduced over the context windows with `aggregate` (default `min`: a token is supported when any
window supports it; LettuceDetect's own chunking takes `max`), then averaged over the response windows that
hold it. Tokens whose probability reaches `threshold` are flagged; consecutive flagged tokens become one
character span of the response (tokenizer offsets, so spans start and end on token bounds). Every token's
probability is kept in `Prediction.scores` for AUPRC/AUROC.

The `lettucedetect` package itself is not a dependency: its inference path scores one example at a time, keeps
no token offsets with the probabilities and truncates a single passage longer than the window, and its
`rag-fact-checker` dependency pins a python-dotenv that conflicts with DSPy's litellm. Its input format is
reproduced in `lettucedetect_prompt`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from shambench.detection.detector import Detector, Monitor, detector
from shambench.detectors._models import PairTemplate, batched, load_pretrained, pad_batch, pick_device, window_bounds
from shambench.errors import DataError
from shambench.schema import Example, Prediction, Span

SETTINGS_FILE = "shambench.json"
"""Written by `shambench train` beside the weights: the input format, max length and threshold to use."""
LETTUCEDETECT_LARGE = "KRLabsOrg/lettucedect-large-modernbert-en-v1"
LETTUCEDETECT_BASE = "KRLabsOrg/lettucedect-base-modernbert-en-v1"
AGGREGATES: dict[str, Callable[..., np.ndarray]] = {"min": np.min, "max": np.max, "mean": np.mean}
_PASSAGE = re.compile(r"^passage \d+:", re.IGNORECASE | re.MULTILINE)


def _passage_block(context: str) -> tuple[str, int]:
    """LettuceDetect's numbered passage block and the passage count; contexts already numbered stay as they are."""
    numbered = _PASSAGE.findall(context)
    if numbered:
        return context, len(numbered)
    return (f"passage 1: {context}", 1) if context else ("", 0)


def lettucedetect_prompt(example: Example) -> str:
    """The prompt LettuceDetect's inference wraps around passages: its QA template, or its summary template."""
    block, n = _passage_block(example.context)
    if not example.question:
        return f"Summarize the following text:\n{block}\noutput:"
    return (
        f"Briefly answer the following question:\n{example.question}\n"
        f"Bear in mind that your response should be strictly based on the following {n} passages:\n{block}\n"
        "In case the passages do not contain the necessary information to answer the question, please reply "
        'with: "Unable to answer based on given passages."\noutput:'
    )


def psiloqa_prompt(example: Example) -> str:
    """PsiloQA's encoder input: the question alone (its training code pairs `question` with the answer).

    Examples without a question (summaries, translations) give their context instead, so the model sees the
    source text rather than nothing.
    """
    return example.question or example.context


INPUT_FORMATS: dict[str, Callable[[Example], str]] = {
    "lettucedetect": lettucedetect_prompt,
    "psiloqa": psiloqa_prompt,
}


def prompt_of(example: Example, input_format: str) -> str:
    """The first segment of the model input for an example."""
    if input_format not in INPUT_FORMATS:
        raise DataError(f"unknown input format {input_format!r}: expected one of {', '.join(INPUT_FORMATS)}")
    return INPUT_FORMATS[input_format](example)


def read_settings(source: str) -> dict[str, Any]:
    """The `shambench.json` settings of a local model folder (empty for hub ids and foreign folders)."""
    path = Path(source) / SETTINGS_FILE
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise DataError(f"{path}: not valid JSON ({err.msg} at line {err.lineno})") from None
    if not isinstance(data, dict):
        raise DataError(f"{path}: expected a JSON object of detector settings")
    return data


class Encoded:
    """One example's response tokens (ids and character offsets) and its prompt ids."""

    def __init__(self, tokenizer: Any, prompt: str, response: str):
        enc = tokenizer(response, add_special_tokens=False, return_offsets_mapping=True)
        self.answer_ids: list[int] = enc["input_ids"]
        self.offsets = np.array(enc["offset_mapping"], dtype=np.int64).reshape(-1, 2)
        self.prompt_ids: list[int] = tokenizer(prompt, add_special_tokens=False)["input_ids"] if prompt else []


def plan_windows(n_prompt: int, n_answer: int, budget: int, overlap: int) -> list[tuple[int, int, int, int]]:
    """`(prompt_lo, prompt_hi, answer_lo, answer_hi)` windows that together cover every answer token.

    `budget` is the number of non-special tokens a window holds. The whole answer goes in every window while it
    leaves at least a quarter of the budget for the prompt; a longer answer is cut into half-budget windows.
    """
    if budget < 2:
        raise DataError(f"max_length leaves {budget} tokens per window; raise max_length")
    if n_prompt + n_answer <= budget:
        return [(0, n_prompt, 0, n_answer)]
    answer_size = n_answer if n_answer <= budget - budget // 4 else budget // 2
    out = []
    for a_lo, a_hi in window_bounds(n_answer, answer_size, min(overlap, answer_size // 2)):
        room = budget - (a_hi - a_lo)
        for p_lo, p_hi in window_bounds(n_prompt, room, min(overlap, room // 2)) if n_prompt else [(0, 0)]:
            out.append((p_lo, p_hi, a_lo, a_hi))
    return out


def spans_of_probs(offsets: np.ndarray, probs: np.ndarray, threshold: float) -> tuple[list[Span], list[Span]]:
    """Thresholded spans (runs of flagged tokens, scored by their max) and every token as a scored range."""
    real = offsets[:, 1] > offsets[:, 0]
    offsets, probs = offsets[real], probs[real]
    scores = [Span(start=int(s), end=int(e), score=float(p)) for (s, e), p in zip(offsets, probs)]
    spans: list[Span] = []
    run: list[int] = []
    for i, flagged in enumerate(probs >= threshold):
        if flagged:
            run.append(i)
        if run and (not flagged or i == len(probs) - 1):
            spans.append(
                Span(
                    start=int(offsets[run[0], 0]),
                    end=int(offsets[run[-1], 1]),
                    score=float(probs[run].max()),
                )
            )
            run = []
    return spans, scores


class TokenClassifier(Detector):
    """A transformers token classifier scoring response tokens, windowed over long contexts and batched."""

    family = "token-classifier"

    def __init__(
        self,
        model: str,
        input_format: str = "lettucedetect",
        max_length: int = 4096,
        threshold: float = 0.5,
        batch_size: int = 8,
        overlap: int = 64,
        aggregate: str = "min",
        device: str = "auto",
    ):
        if input_format not in INPUT_FORMATS:
            raise DataError(f"unknown input format {input_format!r}: expected one of {', '.join(INPUT_FORMATS)}")
        if aggregate not in AGGREGATES:
            raise DataError(f"unknown aggregate {aggregate!r}: expected one of {', '.join(AGGREGATES)}")
        if not 0.0 <= threshold <= 1.0:
            raise DataError(f"threshold must be in [0, 1], got {threshold}")
        self.model_source = str(model)
        self.input_format = input_format
        self.max_length = int(max_length)
        self.threshold = float(threshold)
        self.batch_size = int(batch_size)
        self.overlap = int(overlap)
        self.aggregate = aggregate
        self.device_name = device
        self._loaded: tuple[Any, Any, PairTemplate, Any, int] | None = None

    def params(self) -> dict[str, Any]:
        return {
            "model": self.model_source,
            "input_format": self.input_format,
            "max_length": self.max_length,
            "threshold": self.threshold,
            "overlap": self.overlap,
            "aggregate": self.aggregate,
        }

    def _load(self) -> tuple[Any, Any, PairTemplate, Any, int]:
        """Tokenizer, model, pair template, device and the index of the hallucinated label (loaded once)."""
        if self._loaded is None:
            from transformers import AutoModelForTokenClassification, AutoTokenizer

            device = pick_device(self.device_name)
            tokenizer = load_pretrained(AutoTokenizer, self.model_source, "tokenizer")
            model = load_pretrained(
                AutoModelForTokenClassification, self.model_source, "token classifier", use_safetensors=True
            )
            model.to(device).eval()
            self._loaded = (tokenizer, model, PairTemplate.of(tokenizer), device, positive_label(model.config))
        return self._loaded

    def token_probs(
        self, examples: Sequence[Example], monitor: Monitor | None = None
    ) -> list[tuple[Encoded, np.ndarray]]:
        """Per example, its encoding and the hallucination probability of each response token."""
        import torch

        tokenizer, model, template, device, positive = self._load()
        encoded = [Encoded(tokenizer, prompt_of(ex, self.input_format), ex.response) for ex in examples]
        budget = min(self.max_length, _model_limit(model.config)) - template.n_special
        rows, owners = [], []
        for k, enc in enumerate(encoded):
            for p_lo, p_hi, a_lo, a_hi in plan_windows(len(enc.prompt_ids), len(enc.answer_ids), budget, self.overlap):
                ids, types, at = template.build(enc.prompt_ids[p_lo:p_hi], enc.answer_ids[a_lo:a_hi])
                rows.append((ids, types))
                owners.append((k, a_lo, a_hi, at))
        if monitor:
            monitor.count("windows", len(rows))
        # Similar lengths in one batch waste less padding.
        order = sorted(range(len(rows)), key=lambda r: len(rows[r][0]))
        window_probs: dict[int, np.ndarray] = {}
        with torch.inference_mode():
            for chunk in batched(order, self.batch_size):
                batch = pad_batch([rows[r] for r in chunk], tokenizer.pad_token_id or 0, device)
                probs = torch.softmax(model(**batch).logits.float(), dim=-1)[..., positive].cpu().numpy()
                for row, r in zip(probs, chunk):
                    _, a_lo, a_hi, at = owners[r]
                    window_probs[r] = row[at : at + a_hi - a_lo]
        return [(enc, self._combine(enc, k, owners, window_probs)) for k, enc in enumerate(encoded)]

    def _combine(self, enc: Encoded, k: int, owners: list, window_probs: dict[int, np.ndarray]) -> np.ndarray:
        """Reduce one example's window probabilities over context windows, then average over answer windows."""
        by_answer: dict[tuple[int, int], list[np.ndarray]] = {}
        for r, (owner, a_lo, a_hi, _) in enumerate(owners):
            if owner == k:
                by_answer.setdefault((a_lo, a_hi), []).append(window_probs[r])
        total = np.zeros(len(enc.answer_ids))
        count = np.zeros(len(enc.answer_ids))
        for (a_lo, a_hi), parts in by_answer.items():
            total[a_lo:a_hi] += AGGREGATES[self.aggregate](np.stack(parts), axis=0)
            count[a_lo:a_hi] += 1
        return total / np.maximum(count, 1)

    def predict(self, examples: Sequence[Example], monitor: Monitor | None = None) -> Iterator[Prediction]:
        # Batches of examples keep memory bounded and let the journal advance as each batch finishes.
        for chunk in batched(list(examples), max(self.batch_size, 1) * 4):
            for ex, (enc, probs) in zip(chunk, self.token_probs(chunk, monitor)):
                spans, scores = spans_of_probs(enc.offsets, probs, self.threshold)
                yield Prediction(id=ex.id, spans=spans, scores=scores)

    def close(self) -> None:
        self._loaded = None


def positive_label(config: Any) -> int:
    """Index of the hallucinated class: a label named like `hallucinated`, else 1 (LettuceDetect's convention)."""
    names = {int(i): str(n).lower() for i, n in (getattr(config, "id2label", None) or {}).items()}
    for i, name in names.items():
        if "halluc" in name and "non" not in name and "not" not in name:
            return i
    return 1


def _model_limit(config: Any) -> int:
    """The longest input the model's position embeddings allow (RoBERTa-style offsets taken off)."""
    limit = int(getattr(config, "max_position_embeddings", 0) or 1 << 30)
    return limit - 2 if getattr(config, "model_type", "") in ("roberta", "xlm-roberta") else limit


def make_token_classifier(model: str, preset: dict[str, Any], **params: Any) -> TokenClassifier:
    """A token classifier with the preset's defaults, overridden by the folder's settings, then by params."""
    merged = {**preset, **read_settings(model), **params}
    return TokenClassifier(model, **merged)


@detector("token-classifier")
def token_classifier(model: str = "", **params: Any) -> Detector:
    """Any token-classification model (MODEL = folder or hub id), e.g. one `shambench train` wrote."""
    if not model:
        raise DataError("token-classifier needs a model: --detector token-classifier:MODEL_DIR (or a hub id)")
    return make_token_classifier(model, {}, **params)


@detector("lettucedetect")
def lettucedetect(model: str = LETTUCEDETECT_LARGE, **params: Any) -> Detector:
    """LettuceDetect (ModernBERT-large, RAGTruth-trained) with its own prompt format; ARG overrides the model."""
    return make_token_classifier(model, {"input_format": "lettucedetect", "max_length": 4096}, **params)


@detector("lettucedetect-base")
def lettucedetect_base(model: str = LETTUCEDETECT_BASE, **params: Any) -> Detector:
    """LettuceDetect's ModernBERT-base checkpoint, with its own prompt format."""
    return make_token_classifier(model, {"input_format": "lettucedetect", "max_length": 4096}, **params)


@detector("psiloqa")
def psiloqa(model: str = "", **params: Any) -> Detector:
    """A PsiloQA-trained ModernBERT token classifier (question + answer input); ARG = its folder or hub id."""
    if not model:
        raise DataError("psiloqa needs the checkpoint: --detector psiloqa:MODEL_DIR (or its hub id)")
    return make_token_classifier(model, {"input_format": "psiloqa", "max_length": 8192}, **params)
