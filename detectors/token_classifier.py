"""Token classifiers: LettuceDetect, PsiloQA and the models `shambench train token-classifier` writes.

A transformers token-classification model reads a pair `(prompt, response)` and labels every response token
supported (0) or hallucinated (1). Tokens whose probability reaches `threshold` are flagged; consecutive flagged
tokens become one character span of the response (offsets of the response tokenised alone, so spans start and
end on token bounds). Every token's probability is kept in `Prediction.scores` for AUPRC/AUROC.

**By default the inference is LettuceDetect's own**, `lettucedetect` 0.2.3 (PyPI), `TransformerDetector.predict`
(`tests/detectors/test_parity_lettucedetect.py` runs both on real examples and requires the same spans):

- the prompt is its `PromptUtils.format_context`: the QA template (`qa_prompt_en.txt`) around the passages
  written `passage 1: ...\npassage 2: ...`, or, without a question, the summary template. A context already
  numbered as RAGTruth's QA passages are (`passage 1:In...\n\npassage 2:...`) is split back into its passages,
  each stripped, which is the list the package is given;
- only `input_ids` and `attention_mask` go to the model: no `token_type_ids` (LettuceDetect never passes them).
  `token_types=True` sends them, for checkpoints trained with them (`shambench train` records that in its
  `shambench.json`);
- the pair is truncated `only_first` at `max_length`: the prompt loses its end (the tokenizer's truncation side),
  the response is never cut;
- when prompt and response do not fit, the passages are grouped greedily, by the package's own token counts, into
  prompts that each fit (`_group_passages_into_chunks`); each group's prompt is scored (a single passage too long
  for the window is truncated as above) and a token's probability is its maximum over the groups.

What shambench does differently, on purpose:

- span offsets are those of the response's own tokens. The package subtracts the first answer token's start, which
  shifts every span of a response that starts with whitespace one character left (tokenizers that trim offsets);
  and where it groups passages (`_build_spans_from_tokens`) it puts the k-th token's prediction on the k-th token
  with non-empty offsets, so after a token whose trimmed offsets are empty (a lone space before a newline, in a
  byte-level BPE) its spans fall one token late;
- `max_length` is capped at the checkpoint's `max_position_embeddings`, the package's is not (longer inputs index
  past a BERT's position table, or run a ModernBERT on positions it was never trained on); LettuceDetect's
  checkpoints take 8,192 positions, so the default 4,096 is not capped;
- a response too long to fit with the special tokens, where the package's tokenizer call fails, is scored in
  overlapping response windows (as with `windows=True`);
- an example without context is given the package's empty passage list (`following 0 passages:`), the question
  kept in the prompt; the package does the same when called with `context=[]`;
- examples are batched rather than scored one at a time: the model inputs of `EXAMPLES_PER_PASS` examples sorted
  by length and grouped so that a batch's padded size stays within `max_batch_tokens` (on a CPU about one long
  input); probabilities agree to about 1e-6;
- on a CPU, a ModernBERT's sliding-window layers attend block by block over only the keys in reach
  (`_models.banded_attention`), not over every key with all but 129 masked: the same probabilities, less work.

`windows=True` is shambench's windowing instead of the passage groups: the prompt is cut into overlapping token
windows (`overlap`), each paired with the whole response (or, for a response longer than half the budget, with
overlapping response windows), so no part of a long passage is dropped; a token's probability is reduced over the
context windows with `aggregate` (there `min` by default: a token is supported when any window supports it), then
averaged over the response windows that hold it.

The `lettucedetect` package is not a runtime dependency (the `parity` test extra installs it): its inference
scores one example at a time, and its `rag-fact-checker` dependency pins an old python-dotenv.

PsiloQA (`s-nlp/PsiloQA`) fine-tunes the same kind of ModernBERT token classifier on `(question, answer)` pairs;
its repository has no inference code, so it runs through the same path with the question as the prompt
(`psiloqa_prompt`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from shambench.detection.detector import Detector, Monitor, detector
from shambench.detectors._models import (
    EXAMPLES_PER_PASS,
    PairTemplate,
    attention_for,
    batch_tokens,
    batched,
    budget_given,
    in_token_batches,
    load_pretrained,
    pad_batch,
    pick_device,
    window_bounds,
)
from shambench.errors import DataError
from shambench.schema import Example, Prediction, Span
from shambench.structured import json_file

SETTINGS_FILE = "shambench.json"
"""Written by `shambench train` beside the weights: the input format, max length, threshold and token types."""
LETTUCEDETECT_LARGE = "KRLabsOrg/lettucedect-large-modernbert-en-v1"
LETTUCEDETECT_BASE = "KRLabsOrg/lettucedect-base-modernbert-en-v1"
AGGREGATES: dict[str, Callable[..., np.ndarray]] = {"min": np.min, "max": np.max, "mean": np.mean}
_PASSAGE = re.compile(r"^passage \d+:", re.IGNORECASE | re.MULTILINE)
LETTUCEDETECT_QA = (
    "Briefly answer the following question:\n{question}\n"
    "Bear in mind that your response should be strictly based on the following {n} passages:\n{passages}\n"
    "In case the passages do not contain the necessary information to answer the question, please reply "
    'with: "Unable to answer based on given passages."\noutput:'
)
"""`lettucedetect/prompts/qa_prompt_en.txt` of lettucedetect 0.2.3, as `str.format` fields."""
LETTUCEDETECT_SUMMARY = "Summarize the following text:\n{passages}\noutput:"
"""`lettucedetect/prompts/summary_prompt_en.txt` of lettucedetect 0.2.3."""
LETTUCEDETECT_SPECIALS = 3
"""The special tokens LettuceDetect's grouping reserves (`[CLS] prompt [SEP] answer [SEP]`), whatever the model."""


def passages_of(context: str) -> list[str]:
    """The passage list LettuceDetect's `predict` takes: a numbered context split at its `passage N:` labels."""
    marks = list(_PASSAGE.finditer(context))
    if not marks:
        return [context] if context else []
    bounds = [m.end() for m in marks]
    ends = [m.start() for m in marks[1:]] + [len(context)]
    lead = context[: marks[0].start()].strip()
    return ([lead] if lead else []) + [context[b:e].strip() for b, e in zip(bounds, ends)]


def format_passages(passages: Sequence[str], question: str | None) -> str:
    """LettuceDetect's prompt around `passages` (`PromptUtils.format_context`, English)."""
    block = "\n".join(f"passage {i}: {p}" for i, p in enumerate(passages, start=1))
    if question is None:
        return LETTUCEDETECT_SUMMARY.format(passages=block)
    return LETTUCEDETECT_QA.format(question=question, n=len(passages), passages=block)


def lettucedetect_prompt(example: Example) -> str:
    """The whole prompt LettuceDetect builds for an example (before any grouping of long inputs)."""
    return format_passages(passages_of(example.context), example.question or None)


def psiloqa_prompt(example: Example) -> str:
    """PsiloQA's encoder input: the question alone, the first segment of its `(question, answer)` pairs.

    `s-nlp/PsiloQA` (checked at 95233ae) publishes the data and its generation code, but its `encoder_train` and
    `encoder_eval` commands are empty: there is no official inference to follow beyond that input, so the model
    runs through LettuceDetect's path (`only_first` truncation, no token types). Examples without a question
    (summaries, translations) give their context instead, so the model sees the source text rather than nothing.
    """
    return example.question or example.context


INPUT_FORMATS: dict[str, Callable[[Example], str]] = {
    "lettucedetect": lettucedetect_prompt,
    "psiloqa": psiloqa_prompt,
}


def prompt_of(example: Example, input_format: str) -> str:
    """The first segment of the model input for an example (the whole prompt, before any grouping)."""
    if input_format not in INPUT_FORMATS:
        raise DataError(f"unknown input format {input_format!r}: expected one of {', '.join(INPUT_FORMATS)}")
    return INPUT_FORMATS[input_format](example)


def lettucedetect_groups(
    count: Callable[[str], int], passages: Sequence[str], question: str | None, n_answer: int, max_length: int
) -> list[list[str]]:
    """LettuceDetect's passage groups: all passages when their prompt fits, else greedy groups that each fit.

    `count` is the number of tokens of a text without special tokens. As in the package, the budget reserves
    three special tokens, a passage line is counted as `passage N: ...` with its number in the whole list, a
    newline between passages costs one token, and a passage over the budget is a group of its own.
    """
    budget = max_length - n_answer - LETTUCEDETECT_SPECIALS
    if count(format_passages(passages, question)) <= budget:
        return [list(passages)]
    room = budget - count(format_passages([""], question))
    if room <= 0:
        return [list(passages)]
    groups: list[list[str]] = []
    current: list[str] = []
    used = 0
    for i, passage in enumerate(passages, start=1):
        size = count(f"passage {i}: {passage}")
        cost = size + (1 if current else 0)
        if current and used + cost > room:
            groups.append(current)
            current, used, cost = [], 0, size
        current.append(passage)
        used += cost
    if current:
        groups.append(current)
    return groups or [list(passages)]


def read_settings(source: str) -> dict[str, Any]:
    """The `shambench.json` settings of a local model folder (empty for hub ids and foreign folders)."""
    path = Path(source) / SETTINGS_FILE
    if not path.is_file():
        return {}
    data = json_file(path, "a JSON object of detector settings", named=True)
    if not isinstance(data, dict):
        raise DataError(f"{path}: expected a JSON object of detector settings")
    return data


class Encoded:
    """One example's response tokens (ids and character offsets) and the ids of each of its prompts."""

    def __init__(self, tokenizer: Any, prompts: Sequence[str], response: str):
        enc = tokenizer(response, add_special_tokens=False, return_offsets_mapping=True)
        self.answer_ids: list[int] = enc["input_ids"]
        self.offsets = np.array(enc["offset_mapping"], dtype=np.int64).reshape(-1, 2)
        self.prompt_ids: list[list[int]] = [
            tokenizer(prompt, add_special_tokens=False)["input_ids"] if prompt else [] for prompt in prompts
        ]


Window = tuple[int, int, int, int, int]
"""`(prompt index, prompt_lo, prompt_hi, answer_lo, answer_hi)`: the token slices one model input holds."""


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


def plan_truncated(prompt_sizes: Sequence[int], n_answer: int, budget: int, left: bool) -> list[Window] | None:
    """Each prompt whole beside the whole answer, its end (`left`: its start) cut to fit: `only_first` truncation.

    None when the answer alone does not fit `budget`, where a tokenizer's `only_first` truncation fails.
    """
    room = budget - n_answer
    if room < 0:
        return None
    out = []
    for j, n in enumerate(prompt_sizes):
        keep = min(n, room)
        out.append((j, n - keep, n, 0, n_answer) if left else (j, 0, keep, 0, n_answer))
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
    """A transformers token classifier scoring response tokens: LettuceDetect's inference by default, batched."""

    family = "token-classifier"

    def __init__(
        self,
        model: str,
        input_format: str = "lettucedetect",
        max_length: int = 4096,
        threshold: float = 0.5,
        max_batch_tokens: int = 0,
        windows: bool = False,
        overlap: int = 64,
        aggregate: str | None = None,
        token_types: bool = False,
        bf16: bool = False,
        device: str = "auto",
    ):
        """`max_batch_tokens`: a batch's padded tokens (0: the device's default); `windows`: shambench's overlapping context windows instead of LettuceDetect's passage groups;
        `overlap`: tokens shared by consecutive windows; `aggregate`: reduction over context windows or groups
        (default `max` as LettuceDetect, `min` with windows); `token_types`: pass `token_type_ids` (only for
        checkpoints trained with them); `bf16`: bfloat16 autocast (faster on CPUs with bf16 units, changes
        probabilities slightly)."""
        if input_format not in INPUT_FORMATS:
            raise DataError(f"unknown input format {input_format!r}: expected one of {', '.join(INPUT_FORMATS)}")
        if aggregate is not None and aggregate not in AGGREGATES:
            raise DataError(f"unknown aggregate {aggregate!r}: expected one of {', '.join(AGGREGATES)}")
        if not 0.0 <= threshold <= 1.0:
            raise DataError(f"threshold must be in [0, 1], got {threshold}")
        self.model_source = str(model)
        self.input_format = input_format
        self.max_length = int(max_length)
        self.threshold = float(threshold)
        self.max_batch_tokens = budget_given(max_batch_tokens)
        self.windows = bool(windows)
        self.overlap = int(overlap)
        self.aggregate = aggregate or ("min" if self.windows else "max")
        self.token_types = bool(token_types)
        self.bf16 = bool(bf16)
        self.device_name = device
        self._loaded: tuple[Any, Any, PairTemplate, Any, int] | None = None

    def params(self) -> dict[str, Any]:
        return {
            "model": self.model_source,
            "input_format": self.input_format,
            "max_length": self.max_length,
            "threshold": self.threshold,
            "max_batch_tokens": batch_tokens(self.max_batch_tokens, self.device_name),
            "windows": self.windows,
            "overlap": self.overlap,
            "aggregate": self.aggregate,
            "token_types": self.token_types,
            "bf16": self.bf16,
        }

    def _load(self) -> tuple[Any, Any, PairTemplate, Any, int]:
        """Tokenizer, model, pair template, device and the index of the hallucinated label (loaded once)."""
        if self._loaded is None:
            from transformers import AutoConfig, AutoModelForTokenClassification, AutoTokenizer

            device = pick_device(self.device_name)
            tokenizer = load_pretrained(AutoTokenizer, self.model_source, "tokenizer")
            config = load_pretrained(AutoConfig, self.model_source, "token classifier config")
            model = load_pretrained(
                AutoModelForTokenClassification,
                self.model_source,
                "token classifier",
                use_safetensors=True,
                **attention_for(config, device),
            )
            model.to(device).eval()
            self._loaded = (tokenizer, model, PairTemplate.of(tokenizer), device, positive_label(model.config))
        return self._loaded

    def encode(self, tokenizer: Any, example: Example, max_length: int) -> Encoded:
        """The response tokens and the prompts to score it against: LettuceDetect's passage groups, or one."""
        if self.windows or self.input_format != "lettucedetect":
            return Encoded(tokenizer, [prompt_of(example, self.input_format)], example.response)
        n_answer = len(tokenizer(example.response, add_special_tokens=False)["input_ids"])
        passages, question = passages_of(example.context), example.question or None
        groups = lettucedetect_groups(
            lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"]),
            passages,
            question,
            n_answer,
            max_length,
        )
        return Encoded(tokenizer, [format_passages(group, question) for group in groups], example.response)

    def plan(self, enc: Encoded, budget: int, truncate_left: bool) -> list[Window]:
        """The model inputs of one example: truncated prompts (LettuceDetect), or windows."""
        if not self.windows:
            sizes = [len(ids) for ids in enc.prompt_ids]
            truncated = plan_truncated(sizes, len(enc.answer_ids), budget, truncate_left)
            if truncated is not None:
                return truncated
        return [
            (j, *window)
            for j, ids in enumerate(enc.prompt_ids)
            for window in plan_windows(len(ids), len(enc.answer_ids), budget, self.overlap)
        ]

    def token_probs(
        self, examples: Sequence[Example], monitor: Monitor | None = None
    ) -> list[tuple[Encoded, np.ndarray]]:
        """Per example, its encoding and the hallucination probability of each response token."""
        import torch

        tokenizer, model, template, device, positive = self._load()
        max_length = min(self.max_length, _model_limit(model.config))
        encoded = [self.encode(tokenizer, ex, max_length) for ex in examples]
        budget = max_length - template.n_special
        left = getattr(tokenizer, "truncation_side", "right") == "left"
        rows, owners = [], []
        for k, enc in enumerate(encoded):
            for j, p_lo, p_hi, a_lo, a_hi in self.plan(enc, budget, left):
                ids, types, at = template.build(enc.prompt_ids[j][p_lo:p_hi], enc.answer_ids[a_lo:a_hi])
                rows.append((ids, types if self.token_types else None))
                owners.append((k, a_lo, a_hi, at))
        if monitor:
            monitor.count("windows", len(rows))

        def run(batch: list[int]) -> list[np.ndarray]:
            padded = pad_batch([rows[r] for r in batch], tokenizer.pad_token_id or 0, device)
            probs = torch.softmax(model(**padded).logits.float(), dim=-1)[..., positive].cpu().numpy()
            return [row[owners[r][3] : owners[r][3] + owners[r][2] - owners[r][1]] for row, r in zip(probs, batch)]

        budget_tokens = batch_tokens(self.max_batch_tokens, self.device_name)
        autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=self.bf16)
        with torch.inference_mode(), autocast:
            window_probs = in_token_batches([len(ids) for ids, _ in rows], budget_tokens, run)
        return [(enc, self._combine(enc, k, owners, window_probs)) for k, enc in enumerate(encoded)]

    def _combine(self, enc: Encoded, k: int, owners: list, window_probs: list[np.ndarray]) -> np.ndarray:
        """Reduce one example's probabilities over its prompts (groups or windows), then average over answer windows."""
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
        # Passes of examples keep memory bounded and let the journal advance as each pass finishes.
        for chunk in batched(list(examples), EXAMPLES_PER_PASS):
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
    """A token classifier with the preset's defaults, overridden by the folder's settings, then by params.

    Token types are sent only to folders `shambench train` wrote (it trains with them); a checkpoint without
    settings is taken to be trained as LettuceDetect's are, without.
    """
    settings = read_settings(model)
    if settings:
        # `shambench train` has always trained with the tokenizer's token types; older folders do not say so.
        settings = {"token_types": True, **settings}
    return TokenClassifier(model, **{**preset, **settings, **params})


@detector("token-classifier")
def token_classifier(model: str = "", max_batch_tokens: int = 0, **params: Any) -> Detector:
    """Any token-classification model (MODEL = folder or hub id), e.g. one `shambench train` wrote.

    Args:
        max_batch_tokens: padded tokens per batch (rows times the longest); 0 picks the device's default.
    """
    if not model:
        raise DataError("token-classifier needs a model: --detector token-classifier:MODEL_DIR (or a hub id)")
    return make_token_classifier(model, {}, max_batch_tokens=max_batch_tokens, **params)


@detector("lettucedetect")
def lettucedetect(model: str = LETTUCEDETECT_LARGE, max_batch_tokens: int = 0, **params: Any) -> Detector:
    """LettuceDetect (ModernBERT-large, RAGTruth-trained) with its own prompt format; ARG overrides the model.

    Args:
        max_batch_tokens: padded tokens per batch (rows times the longest); 0 picks the device's default.
    """
    preset = {"input_format": "lettucedetect", "max_length": 4096}
    return make_token_classifier(model, preset, max_batch_tokens=max_batch_tokens, **params)


@detector("lettucedetect-base")
def lettucedetect_base(model: str = LETTUCEDETECT_BASE, max_batch_tokens: int = 0, **params: Any) -> Detector:
    """LettuceDetect's ModernBERT-base checkpoint, with its own prompt format.

    Args:
        max_batch_tokens: padded tokens per batch (rows times the longest); 0 picks the device's default.
    """
    preset = {"input_format": "lettucedetect", "max_length": 4096}
    return make_token_classifier(model, preset, max_batch_tokens=max_batch_tokens, **params)


@detector("psiloqa")
def psiloqa(model: str = "", max_batch_tokens: int = 0, **params: Any) -> Detector:
    """A PsiloQA-trained ModernBERT token classifier (question + answer input); ARG = its folder or hub id.

    Args:
        max_batch_tokens: padded tokens per batch (rows times the longest); 0 picks the device's default.
    """
    if not model:
        raise DataError("psiloqa needs the checkpoint: --detector psiloqa:MODEL_DIR (or its hub id)")
    preset = {"input_format": "psiloqa", "max_length": 8192}
    return make_token_classifier(model, preset, max_batch_tokens=max_batch_tokens, **params)
