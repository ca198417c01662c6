"""Sentence verifiers: MiniCheck and AlignScore label each response sentence supported or not by the context.

Every response sentence is one claim (the scorer's own sentence units, `shambench.scoring.text.sentences`, so
`Prediction.sentence_labels` lines up with the units the sentence-level metric counts). The context is cut
into chunks as each method prescribes, each (chunk, claim) pair gets a support probability, and a claim's
support is its best chunk's (both methods aggregate with max). A claim is labelled hallucinated (1) when its
support is at most `threshold` (MiniCheck calls a claim supported when the probability exceeds 0.5). Flagged
sentences are also returned as spans, and every sentence as a range scored `1 - support`.

- `minicheck:MODEL` — the MiniCheck encoders (`lytang/MiniCheck-RoBERTa-Large`, `lytang/MiniCheck-DeBERTa-v3-Large`):
  a sequence classifier reading `chunk + </s> + claim` as one text (the chunk cut, if need be, so that the claim
  always fits); chunks of about 400 tokens of whole context sentences; support = P(label 1).
- `alignscore:CKPT` — AlignScore's RoBERTa checkpoint (`AlignScore-large.ckpt`, read with `weights_only=True`,
  or a folder holding `model.safetensors` with the same keys): RoBERTa's pooled output through the 3-way
  `tri_layer`; support = P(aligned), AlignScore's `nli_sp` mode; chunks of about 350 words; the tokenizer comes
  from `backbone` (default `roberta-large`).
- `bespoke-minicheck` — Bespoke-MiniCheck-7B served by vLLM's OpenAI-compatible API: one token generated with
  its top log-probabilities, support = the summed probability of the `Yes` tokens; chunks of about 24,000 words
  (its 32k-token window less room for the claim).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from shambench.detection.detector import Detector, Monitor, detector
from shambench.detectors._models import batched, load_pretrained, pick_device
from shambench.errors import DataError
from shambench.llm.api import APIDetector
from shambench.schema import Example, Prediction, Span
from shambench.scoring.text import sentences

MINICHECK_ROBERTA = "lytang/MiniCheck-RoBERTa-Large"
MINICHECK_SYSTEM = (
    "Determine whether the provided claim is consistent with the corresponding document. Consistency in this "
    "context implies that all information presented in the claim is substantiated by the document. If not, it "
    "should be considered inconsistent. Please assess the claim's consistency with the document by responding with "
    'either "Yes" or "No".'
)


def chunk_sentences(text: str, budget: int, size_of) -> list[str]:
    """Consecutive context sentences joined greedily into chunks of at most `budget` (by `size_of`); never empty.

    A single sentence longer than the budget is its own chunk (the verifier cuts it to fit the model).
    """
    chunks: list[str] = []
    current: list[str] = []
    used = 0
    for s, e in sentences(text):
        sentence = text[s:e]
        size = size_of(sentence)
        if current and used + size > budget:
            chunks.append(" ".join(current))
            current, used = [], 0
        current.append(sentence)
        used += size
    if current:
        chunks.append(" ".join(current))
    return chunks or [""]


def _words(text: str) -> int:
    return len(text.split())


class SentenceVerifier(Detector):
    """Base of the sentence verifiers: claims, chunks, max-over-chunks support and the sentence labels."""

    family = "sentence-verifier"
    chunk_budget = 400
    """Chunk size, in the unit `chunk_size` measures."""

    def __init__(self, threshold: float = 0.5, batch_size: int = 16):
        if not 0.0 <= threshold <= 1.0:
            raise DataError(f"threshold must be in [0, 1], got {threshold}")
        self.threshold = float(threshold)
        self.batch_size = int(batch_size)

    def params(self) -> dict[str, Any]:
        return {"threshold": self.threshold, "chunk_budget": self.chunk_budget}

    def chunk_size(self, text: str) -> int:
        """Size of a text in the chunk budget's unit (words unless a subclass counts tokens)."""
        return _words(text)

    def support(
        self, pairs: Sequence[tuple[str, str]], monitor: Monitor | None = None
    ) -> tuple[np.ndarray, dict[int, str]]:
        """Support probability of each (chunk, claim) pair, and why a pair failed, by index (API models only)."""
        raise NotImplementedError

    def chunks(self, example: Example) -> list[str]:
        """The context (the question when there is none) in chunks of `chunk_budget`."""
        return chunk_sentences(example.context or example.question, self.chunk_budget, self.chunk_size)

    def predict(self, examples: Sequence[Example], monitor: Monitor | None = None) -> Iterator[Prediction]:
        for chunk in batched(list(examples), max(1, self.batch_size)):
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


class MiniCheckEncoder(SentenceVerifier):
    """A MiniCheck sequence classifier (RoBERTa or DeBERTa) scoring `chunk </s> claim` texts."""

    def __init__(self, model: str = MINICHECK_ROBERTA, max_length: int = 512, device: str = "auto", **kwargs: Any):
        super().__init__(**kwargs)
        self.model_source, self.max_length, self.device_name = str(model), int(max_length), device
        self._loaded: tuple[Any, Any, Any] | None = None

    def params(self) -> dict[str, Any]:
        return {**super().params(), "model": self.model_source, "max_length": self.max_length}

    def _load(self) -> tuple[Any, Any, Any]:
        if self._loaded is None:
            from transformers import AutoModelForSequenceClassification, AutoTokenizer

            device = pick_device(self.device_name)
            tokenizer = load_pretrained(AutoTokenizer, self.model_source, "tokenizer")
            model = load_pretrained(
                AutoModelForSequenceClassification, self.model_source, "MiniCheck model", use_safetensors=True
            )
            self._loaded = (tokenizer, model.to(device).eval(), device)
        return self._loaded

    def chunk_size(self, text: str) -> int:
        return len(self._load()[0](text, add_special_tokens=False)["input_ids"])

    def support(
        self, pairs: Sequence[tuple[str, str]], monitor: Monitor | None = None
    ) -> tuple[np.ndarray, dict[int, str]]:
        import torch

        tokenizer, model, device = self._load()
        # MiniCheck joins document and claim with the tokenizer's end-of-sequence token into one text.
        joint = tokenizer.eos_token or tokenizer.sep_token
        doc_offsets: dict[str, list[tuple[int, int]]] = {}
        out = []
        with torch.inference_mode():
            for part in batched(list(pairs), self.batch_size):
                enc = tokenizer(
                    [
                        f"{self._fitted(tokenizer, doc, joint + claim, doc_offsets)}{joint}{claim}"
                        for doc, claim in part
                    ],
                    truncation=True,
                    max_length=self.max_length,
                    padding=True,
                    return_tensors="pt",
                ).to(device)
                out.append(torch.softmax(model(**enc).logits.float(), dim=-1)[:, 1].cpu().numpy())
        if monitor:
            monitor.count("pairs", len(pairs))
        return np.concatenate(out), {}

    def _fitted(self, tokenizer: Any, doc: str, tail: str, doc_offsets: dict[str, list[tuple[int, int]]]) -> str:
        """`doc` cut at a token end so that `tail` (separator and claim) fits whole within `max_length`.

        Truncating the joined text, as MiniCheck's own code does, would cut the claim when a chunk is long (a
        context sentence over the chunk budget), and the sentence would then be judged without being read.
        """
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

    chunk_budget = 350

    def __init__(
        self,
        checkpoint: str,
        backbone: str = "roberta-large",
        max_length: int = 512,
        device: str = "auto",
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        self.checkpoint, self.backbone = str(checkpoint), str(backbone)
        self.max_length, self.device_name = int(max_length), device
        self._loaded: tuple[Any, Any, Any, Any] | None = None

    def params(self) -> dict[str, Any]:
        return {**super().params(), "checkpoint": self.checkpoint, "backbone": self.backbone}

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
        out = []
        with torch.inference_mode():
            for part in batched(list(pairs), self.batch_size):
                enc = tokenizer(
                    [doc for doc, _ in part],
                    [claim for _, claim in part],
                    truncation="only_first",
                    max_length=self.max_length,
                    padding=True,
                    return_tensors="pt",
                ).to(device)
                pooled = encoder(**enc).pooler_output
                out.append(torch.softmax(head(pooled).float(), dim=-1)[:, 0].cpu().numpy())
        if monitor:
            monitor.count("pairs", len(pairs))
        return np.concatenate(out), {}

    def close(self) -> None:
        self._loaded = None


def yes_probability(completion: Any) -> float:
    """The summed probability of the `Yes` alternatives of the first generated token (MiniCheck's reading)."""
    top = completion.top_logprobs
    if not top:
        raise ValueError("the server returned no log-probabilities (vLLM returns them when asked with logprobs)")
    return float(sum(math.exp(lp) for token, lp in top.items() if token.strip().lower() == "yes"))


class BespokeMiniCheck(SentenceVerifier, APIDetector):
    """Bespoke-MiniCheck-7B behind an OpenAI-compatible server (vLLM), read from its first token's logprobs."""

    # Its 32,768-token window less 300 for the claim and prompt, at about 1.3 tokens per word.
    chunk_budget = 24_000
    generation = {"max_tokens": 1, "temperature": 0, "logprobs": True, "top_logprobs": 5}
    """The request body: one token, greedy, with its five most likely alternatives."""

    def __init__(self, endpoint: Any, use_cache: bool = True, **kwargs: Any):
        SentenceVerifier.__init__(self, **kwargs)
        APIDetector.__init__(self, endpoint, use_cache)

    def params(self) -> dict[str, Any]:
        return {**SentenceVerifier.params(self), **APIDetector.params(self)}

    @staticmethod
    def messages(doc: str, claim: str) -> list[dict[str, str]]:
        """MiniCheck's system prompt and its `Document: ...\nClaim: ...` user turn."""
        return [
            {"role": "system", "content": MINICHECK_SYSTEM},
            {"role": "user", "content": f"Document: {doc}\nClaim: {claim}"},
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
def minicheck(model: str = MINICHECK_ROBERTA, **params: Any) -> Detector:
    """MiniCheck encoder (RoBERTa/DeBERTa) labelling each response sentence; ARG = model folder or hub id."""
    return MiniCheckEncoder(model, **params)


@detector("alignscore")
def alignscore(checkpoint: str = "", **params: Any) -> Detector:
    """AlignScore (RoBERTa, nli_sp) labelling each response sentence; ARG = AlignScore .ckpt or folder."""
    if not checkpoint:
        raise DataError("alignscore needs its checkpoint: --detector alignscore:PATH/AlignScore-large.ckpt")
    return AlignScore(checkpoint, **params)


@detector("bespoke-minicheck")
def bespoke_minicheck(
    model: str = "bespokelabs/Bespoke-MiniCheck-7B",
    base_url: str | None = None,
    api_key_env: str | None = None,
    max_concurrency: int | None = None,
    timeout: float | None = None,
    cache: bool = True,
    **params: Any,
) -> Detector:
    """Bespoke-MiniCheck-7B served by vLLM (--base-url), P(Yes) per response sentence from logprobs."""
    from shambench.llm.client import DEFAULT_KEY_ENV, Endpoint

    if not base_url:
        raise DataError("bespoke-minicheck needs --base-url of the vLLM server serving Bespoke-MiniCheck-7B")
    given: dict[str, Any] = {"max_concurrency": max_concurrency, "timeout": timeout}
    endpoint = Endpoint(
        model=model,
        base_url=base_url,
        api_key_env=api_key_env or DEFAULT_KEY_ENV,
        **{k: v for k, v in given.items() if v is not None},
    )
    return BespokeMiniCheck(endpoint, use_cache=bool(cache), **params)
