"""Step-level (math) verifiers: baselines, process reward models (PRMs) and a prompted critic.

A PRM gives each step a probability of being correct (`Prediction.step_scores`); `shambench eval` applies the
threshold (tuned per suite, see `shambench.scoring.steps`). For the span view a PRM also marks the steps scoring below
`span_threshold` and gives every step's 1 - score as a scored range. The input, the model class and the probability
read follow each PRM's own inference code (`-p format=`; `auto`, the default, picks it from the model's name and
refuses a name it does not know):

- `qwen2.5-math-prm` — the model cards of Qwen/Qwen2.5-Math-PRM-7B, -72B and Qwen2.5-Math-7B-PRM800K (ProcessBench's
  baseline): chat messages (system "Please reason step by step, and put your final answer within \\boxed{}.", the
  question as the user turn, the steps each followed by `<extra_0>` and joined with nothing as the assistant turn)
  rendered with the tokenizer's chat template (`add_generation_prompt=False`), encoded without truncation, run
  through `AutoModel` with remote code; a step's score is the softmax probability of class 1 at its `<extra_0>`.
- `math-shepherd` — the model card of peiyi9979/math-shepherd-mistral-7b-prm: `f"{question} {output}"` where the
  output is the steps each followed by " ки", joined by a newline (exactly the released data's `input` field),
  encoded without truncation, run through `AutoModelForCausalLM`; a step's score is the softmax over the logits of
  the `+` and `-` tokens, read for `+`, at each `ки` token. The card finds these ids as `encode("+ -")[1:]` and
  `encode("ки")[-1]` (dropping Mistral's BOS); shambench encodes without special tokens and keeps both ids, the same
  ids on that tokenizer, and refuses a tokenizer where they are not single tokens.
- `sharp` — SHARP's PRMs: after "Question: {question}\\n\\nSolution:\\n", each step followed by `<extra_0>`, steps
  joined by a blank line, class 1 of a two-logit token head (`AutoModelForTokenClassification`) at each marker
  (shambench's earlier format, not yet checked against SHARP's own scoring code).
  Every format is encoded whole, as the cards do (shambench no longer truncates: an input longer than the model
  takes fails that example, where truncation silently dropped the last steps' scores). The cards run one input
  at a time; shambench sorts them by length and runs them right-padded, with an attention mask, in batches
  whose padded size stays within `max_batch_tokens` (a failing batch is run again one input at a time, so only
  the failing example fails).

Backends: `transformers` (the model run here as above; `-p auto_class=` and `-p trust_remote_code=` override the
format's) and `openai`, a vLLM server's `/pooling` endpoint with the STEP pooler: the chat messages for
`qwen2.5-math-prm` (the server applies the template), the text otherwise; each row's last entry is read as
p(correct), except for `math-shepherd`, served with `returned_token_ids` = [+, -] as the card orders them, whose
last entry is p(-) and whose score is 1 - p(-) = p(+). ProcessBench's repository (QwenLM/ProcessBench e802463)
evaluates critics and one generative PRM (`run_eval_prm_rlhflow.py`), not these PRMs, and fixes no threshold for
them; shambench tunes it per suite.
The critic asks a chat model through `shambench.llm.client` either for a verdict per step (`mode=steps`: "Verdict: yes,
no, ...", Hard2Verify's format) or for the first wrong step (`mode=first-error`: "Verdict: 3", -1 for none).
A reply without a `Verdict:` line, or whose verdict line holds no verdict at all, is a failed prediction (its text
kept, not cached, retried by `--resume`); single unreadable entries of a verdict line are kept as -2 and scored by
the metric's rules.

    shambench eval --suite processbench --detector all-correct
    shambench eval --suite sharp --detector prm:/models/Qwen2.5-Math-7B-SHARP-Step -p backend=transformers
    shambench eval --suite hard2verify --detector critic --model gpt-5-mini -p mode=first-error
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
    in_token_batches,
    pad_batch,
)
from shambench.errors import DataError
from shambench.llm.api import APIDetector
from shambench.llm.endpoint import EndpointOptions, endpoint_of, takes_endpoint_options
from shambench.schema import Example, Prediction, Span
from shambench.structured import json_value

MARKER = "<extra_0>"
PRM_QUESTION = "Question: {question}\n\nSolution:\n"
STEP_JOIN = "\n\n"
QWEN_PRM_SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."
SHEPHERD_TAG, SHEPHERD_GOOD, SHEPHERD_BAD = "ки", "+", "-"
PRM_FORMATS = ("qwen2.5-math-prm", "math-shepherd", "sharp")
# Lower-cased name fragments of the published checkpoints, for `format=auto`.
PRM_NAMES = {
    "qwen2.5-math-prm": "qwen2.5-math-prm",
    "qwen2.5-math-7b-prm800k": "qwen2.5-math-prm",
    "math-shepherd": "math-shepherd",
    "sharp": "sharp",
}
AUTO_CLASSES = {
    "qwen2.5-math-prm": "AutoModel",
    "math-shepherd": "AutoModelForCausalLM",
    "sharp": "AutoModelForTokenClassification",
}


def step_texts(example: Example) -> list[str]:
    """The text of each step of a step-level example; DataError for an example without steps."""
    if not example.steps:
        raise DataError(f"example {example.id!r} has no steps: math detectors need a step-level dataset")
    return [example.response[s.start : s.end] for s in example.steps]


def flagged_spans(example: Example, verdicts: Sequence[int]) -> list[Span]:
    """The ranges of the steps judged erroneous (verdict 0), for the span view."""
    return [Span(start=s.start, end=s.end) for s, v in zip(example.steps or [], verdicts) if v == 0 and s.end > s.start]


def verdict_prediction(example: Example, verdicts: list[int], first_error: int | None = None, **extra) -> Prediction:
    """A prediction carrying step verdicts (and a first-error index) with the flagged steps as spans."""
    return Prediction(
        id=example.id,
        step_verdicts=verdicts,
        first_error=first_error,
        spans=flagged_spans(example, verdicts),
        **extra,
    )


class AllCorrect(Detector):
    """Judges every step correct (first error -1)."""

    family = "baseline"

    def detect(self, example: Example) -> Prediction:
        return verdict_prediction(example, [1] * len(step_texts(example)), -1)


class FirstStepWrong(Detector):
    """Judges the first step erroneous and the others correct (first error 0)."""

    family = "baseline"

    def detect(self, example: Example) -> Prediction:
        n = len(step_texts(example))
        return verdict_prediction(example, [0] + [1] * (n - 1), 0)


def prm_prediction(example: Example, scores: list[float], span_threshold: float, **extra) -> Prediction:
    """A PRM's prediction: its step scores, the steps below `span_threshold` as spans, 1 - score as scores."""
    steps = example.steps or []
    ranges = [Span(start=s.start, end=s.end, score=1.0 - p) for s, p in zip(steps, scores) if s.end > s.start]
    return Prediction(
        id=example.id,
        step_scores=scores,
        spans=flagged_spans(example, [int(p >= span_threshold) for p in scores]),
        scores=ranges,
        **extra,
    )


class RandomStep(Detector):
    """A PRM stand-in: a uniform random score per step, seeded per example id."""

    family = "baseline"

    def __init__(self, seed: int = 0, span_threshold: float = 0.5):
        self.seed, self.span_threshold = int(seed), float(span_threshold)

    def params(self) -> dict:
        return {"seed": self.seed, "span_threshold": self.span_threshold}

    def detect(self, example: Example) -> Prediction:
        rng = np.random.default_rng([self.seed, *example.id.encode()])
        scores = rng.random(len(step_texts(example))).tolist()
        return prm_prediction(example, scores, self.span_threshold)


def prm_format(model: str, given: str = "auto") -> str:
    """The PRM input format: `given`, or for `auto` the one named by the model's name; DataError otherwise."""
    if given != "auto":
        if given not in PRM_FORMATS:
            raise DataError(f"unknown PRM format {given!r} (use auto or one of {', '.join(PRM_FORMATS)})")
        return given
    name = model.lower()
    for fragment, fmt in PRM_NAMES.items():
        if fragment in name:
            return fmt
    raise DataError(f"cannot tell the input format of PRM {model!r}: say -p format={'|'.join(PRM_FORMATS)}")


def prm_input(example: Example, fmt: str = "sharp") -> str:
    """The PRM's input text: SHARP's (question header, `<extra_0>` after each step, blank lines between) or
    Math-Shepherd's (question, a space, steps each ending in " ки" joined by newlines)."""
    if fmt == "math-shepherd":
        steps = "\n".join(f"{text} {SHEPHERD_TAG}" for text in step_texts(example))
        return f"{example.question} {steps}"
    steps = STEP_JOIN.join(text + MARKER for text in step_texts(example))
    return PRM_QUESTION.format(question=example.question) + steps


def qwen_prm_messages(example: Example) -> list[dict[str, str]]:
    """Qwen2.5-Math-PRM's chat: its system prompt, the question, the steps each followed by `<extra_0>`."""
    return [
        {"role": "system", "content": QWEN_PRM_SYSTEM},
        {"role": "user", "content": example.question},
        {"role": "assistant", "content": "".join(text + MARKER for text in step_texts(example))},
    ]


def single_token(tokenizer: Any, text: str, model: str) -> int:
    """The id of `text` when the tokenizer makes it one token (no special tokens); DataError otherwise."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    if len(ids) != 1 or ids[0] == tokenizer.unk_token_id:
        raise DataError(f"{model}: the tokenizer does not make {text!r} a single token")
    return ids[0]


PRM_ENDPOINT: EndpointOptions = {"max_concurrency": 4}
"""The openai PRM backend's endpoint defaults: 4 requests in flight unless `max_concurrency` is given."""
PRM_FAILURES = (OSError, ValueError, KeyError, TypeError, IndexError, RecursionError, RuntimeError)
"""What encoding or running one input may raise (too long for the positions, an odd template): that example fails."""


class TransformersPRM:
    """A PRM run here, reading each step's score as the format's official code does."""

    def __init__(self, model_name: str, fmt: str, auto_class: str, trust: bool):
        import transformers

        self.fmt = fmt
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(model_name, trust_remote_code=trust)
        self.model = getattr(transformers, auto_class).from_pretrained(model_name, trust_remote_code=trust).eval()
        # Math-Shepherd reads + against - at each tag; the others class 1 of the head at each marker.
        shepherd = fmt == "math-shepherd"
        self.read = (
            [single_token(self.tokenizer, t, model_name) for t in (SHEPHERD_GOOD, SHEPHERD_BAD)] if shepherd else None
        )
        self.mark = single_token(self.tokenizer, SHEPHERD_TAG if shepherd else MARKER, model_name)

    def encode(self, example: Example) -> list[int]:
        """The input ids of an example (the format's text, encoded whole with the tokenizer's special tokens)."""
        if self.fmt == "qwen2.5-math-prm":
            messages = qwen_prm_messages(example)
            text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)
        else:
            text = prm_input(example, self.fmt)
        return self.tokenizer.encode(text)

    def run(self, inputs: list[list[int]]) -> list[list[float]]:
        """The step scores of each input, run as one right-padded batch."""
        import torch

        padded = pad_batch([(ids, None) for ids in inputs], self.tokenizer.pad_token_id or 0, self.model.device)
        with torch.inference_mode():
            out = self.model(**padded)
        logits = (out.logits if hasattr(out, "logits") else out[0]).float()
        scores = []
        for row, ids in zip(logits, inputs):
            at = row[: len(ids)][torch.tensor(ids, device=row.device) == self.mark]
            if self.read is None:
                scores.append(torch.softmax(at, dim=-1)[:, 1].tolist())
            else:
                scores.append(torch.softmax(at[:, self.read], dim=-1)[:, 0].tolist())
        return scores

    def run_or_fail(self, inputs: list[list[int]]) -> list[list[float] | str]:
        """`run`, or when the batch fails each input alone, with the error of an input that fails alone."""
        try:
            return list(self.run(inputs))
        except PRM_FAILURES as err:
            if len(inputs) == 1:
                return [f"{type(err).__name__}: {err}"]
        return [result for ids in inputs for result in self.run_or_fail([ids])]

    def score_all(self, examples: Sequence[Example], max_tokens: int) -> list[list[float] | str]:
        """Per example, its step scores, or why it failed."""
        encoded: list[list[int] | str] = []
        for example in examples:
            try:
                encoded.append(self.encode(example))
            except PRM_FAILURES as err:
                encoded.append(f"{type(err).__name__}: {err}")
        ok = [i for i, ids in enumerate(encoded) if not isinstance(ids, str)]
        inputs = [ids for ids in encoded if not isinstance(ids, str)]
        results = in_token_batches(
            [len(ids) for ids in inputs], max_tokens, lambda b: self.run_or_fail([inputs[i] for i in b])
        )
        out: list[list[float] | str] = [ids if isinstance(ids, str) else [] for ids in encoded]  # failures' reasons
        for i, result in zip(ok, results):
            out[i] = result
        return out


class PRMDetector(APIDetector):
    """A process reward model behind a transformers or OpenAI-compatible (vLLM `/pooling`) backend; the latter
    through the shared client (retries, response cache, accounting) like every API-backed detector."""

    family = "prm"

    def __init__(
        self,
        model: str,
        backend: str = "openai",
        span_threshold: float = 0.5,
        format: str = "auto",
        endpoint: EndpointOptions | None = None,
        **options: Any,
    ):
        if backend not in ("openai", "transformers"):
            raise DataError(f"unknown PRM backend {backend!r} (use openai or transformers)")
        if not model:
            raise DataError("the prm detector needs a model: prm:PATH_OR_NAME or --model NAME")
        # Refused before the run records its parameters: credentials in the URL would reach config.json.
        given: EndpointOptions = endpoint or {}
        super().__init__(endpoint_of(model, PRM_ENDPOINT, **given), use_cache=bool(options.get("cache", True)))
        self.model, self.backend, self.span_threshold = model, backend, float(span_threshold)
        self.format = prm_format(model, format)
        self.max_batch_tokens = budget_given(options.pop("max_batch_tokens", 0) or 0)
        self.options = {**given, **options}  # the endpoint options given are recorded as before, with the rest

    def params(self) -> dict[str, Any]:
        safe = {k: v for k, v in self.options.items() if k != "api_key"}
        # The resolved format, so that `--resume` rebuilds the same input whatever `auto` would pick later.
        given = {"model": self.model, "backend": self.backend, "span_threshold": self.span_threshold}
        if self.backend == "transformers":  # the transformers backend runs on the CPU
            given["max_batch_tokens"] = batch_tokens(self.max_batch_tokens, "cpu")
        return {**given, "format": self.format, **safe}

    def predict(self, examples: Sequence[Example], monitor: Monitor | None = None) -> Iterator[Prediction]:
        if self.backend == "openai":
            if not self.endpoint.base_url:
                raise DataError("the openai PRM backend needs --base-url (a vLLM server with the STEP pooler)")
            yield from self.map(examples, self.predict_one, monitor)
            return
        monitor = monitor or Monitor()
        trust = bool(self.options.get("trust_remote_code", self.format == "qwen2.5-math-prm"))
        auto_class = self.options.get("auto_class") or AUTO_CLASSES[self.format]
        prm = TransformersPRM(self.model, self.format, auto_class, trust)
        budget = batch_tokens(self.max_batch_tokens, "cpu")
        for chunk in batched(list(examples), EXAMPLES_PER_PASS):
            for example, scores in zip(chunk, prm.score_all(chunk, budget)):
                if isinstance(scores, str):
                    pred = Prediction(id=example.id, error=scores)
                else:
                    pred = self._prediction(example, scores, {})
                monitor.count("failed" if pred.error else "scored")
                yield pred

    async def predict_one(self, client: Any, example: Example) -> Prediction:
        """The step scores of one example from the server's pooling API (`/pooling`, STEP pooler)."""
        from shambench.llm.client import LLMError

        if self.format == "qwen2.5-math-prm":
            body: dict[str, Any] = {"messages": qwen_prm_messages(example)}
        else:
            body = {"input": prm_input(example, self.format)}
        try:
            reply = await client.request(
                "pooling", body, accept=lambda c: json_value(c.text, "the pooling reply", "step scores")
            )
        except LLMError as err:
            return Prediction(id=example.id, error=err.reason, meta={"usage": err.usage.model_dump()})
        # A row's last entry is p(-) for Math-Shepherd's [+, -] and p(correct) for the others' [0, 1].
        scores = [1.0 - p for p in reply.parsed] if self.format == "math-shepherd" else reply.parsed
        return self._prediction(example, scores, {"usage": reply.usage.model_dump()})

    def _prediction(self, example: Example, scores: list[float], meta: dict[str, Any]) -> Prediction:
        if len(scores) != len(example.steps or []):
            meta = {**meta, "n_scores": len(scores)}
        return prm_prediction(example, scores, self.span_threshold, meta=meta)


VERDICT = re.compile(r"\bverdict:\s*(.+)", re.IGNORECASE)
CRITIC_SYSTEM = (
    "You grade mathematical solutions step by step. A step is correct only if everything in it is right and it "
    "follows from the problem and the earlier steps; a step that builds on an earlier error is incorrect."
)
CRITIC_TASKS = {
    "steps": (
        "For each step, decide whether it is correct. Explain briefly, then end with one line\n"
        "Verdict: <yes or no for each step, comma-separated, in order>\n"
        "with exactly {n} entries (yes = correct, no = incorrect)."
    ),
    "first-error": (
        "Find the first incorrect step. Explain briefly, then end with one line\n"
        "Verdict: <the 0-based index of the first incorrect step, or -1 if every step is correct>"
    ),
}


def critic_messages(example: Example, mode: str) -> list[dict[str, str]]:
    """The chat messages asking for a verdict on the numbered steps of an example."""
    steps = "\n\n".join(f"<step {i}>\n{text}\n</step {i}>" for i, text in enumerate(step_texts(example)))
    task = CRITIC_TASKS[mode].format(n=len(example.steps or []))
    user = f"Problem:\n{example.question}\n\nSolution, in steps numbered from 0:\n\n{steps}\n\n{task}"
    return [{"role": "system", "content": CRITIC_SYSTEM}, {"role": "user", "content": user}]


def _last_verdict(text: str) -> str:
    found = VERDICT.findall(text.replace("\r\n", "\n").replace("\r", "\n"))
    return found[-1].strip() if found else ""


def parse_step_verdicts(text: str) -> list[int]:
    """Per-step verdicts from the last `Verdict:` line: yes 1, no 0, anything else -2. ValueError when there is
    no such line, or when not one of its entries is yes or no (e.g. the prompt's own placeholder echoed)."""
    verdict = _last_verdict(text)
    if not verdict:
        raise ValueError(f"no 'Verdict:' line in the reply ({_tail(text)})")
    out = []
    for item in verdict.split(","):
        words = re.findall(r"[a-z]+", item.lower())
        out.append(1 if "yes" in words and "no" not in words else 0 if "no" in words and "yes" not in words else -2)
    if all(v == -2 for v in out):
        raise ValueError(f"the Verdict line holds no yes or no ({verdict[:80]!r})")
    return out


def parse_first_error(text: str) -> int:
    """The index on the last `Verdict:` line: -1 or a non-negative integer. ValueError when there is no such line
    or it holds neither."""
    verdict = _last_verdict(text).rstrip(".").strip()
    if verdict == "-1" or verdict.isdigit():
        return int(verdict)
    if not verdict:
        raise ValueError(f"no 'Verdict:' line in the reply ({_tail(text)})")
    raise ValueError(f"the Verdict line holds no step index ({verdict[:80]!r})")


def _tail(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else "…" + text[-limit:])


class CriticDetector(APIDetector):
    """A chat model judging the steps (a verdict per step, or the first wrong step) through `shambench.llm.client`."""

    family = "critic"

    def __init__(self, endpoint: Any, mode: str, generation: dict[str, Any], use_cache: bool = True):
        if mode not in CRITIC_TASKS:
            raise DataError(f"unknown critic mode {mode!r} (use {' or '.join(CRITIC_TASKS)})")
        super().__init__(endpoint, use_cache)
        self.mode, self.generation = mode, generation

    def params(self) -> dict[str, Any]:
        return {
            **super().params(),
            "mode": self.mode,
            "generation": self.generation,
        }

    async def predict_one(self, client: Any, example: Example) -> Prediction:
        from shambench.llm.client import LLMError

        parse = parse_step_verdicts if self.mode == "steps" else parse_first_error
        try:
            reply = await client.chat(
                critic_messages(example, self.mode), dict(self.generation), lambda c: parse(c.text)
            )
        except LLMError as err:
            return Prediction(id=example.id, error=err.reason, raw=err.text, meta={"usage": err.usage.model_dump()})
        meta = {"usage": reply.usage.model_dump(), "request": reply.key, "served_model": reply.served_model}
        n = len(example.steps or [])
        if self.mode == "steps":
            return verdict_prediction(example, reply.parsed, raw=reply.text, meta=meta)
        first = reply.parsed
        spans = [] if first < 0 or first >= n else flagged_spans(example, [int(i != first) for i in range(n)])
        return Prediction(id=example.id, first_error=first, spans=spans, raw=reply.text, meta=meta)


@detector("all-correct", family="baseline", reference=True)
def all_correct() -> Detector:
    """Step-level baseline: every step correct (first error -1)."""
    return AllCorrect()


@detector("first-step-wrong", family="baseline", reference=True)
def first_step_wrong() -> Detector:
    """Step-level baseline: the first step is the first error, the others correct."""
    return FirstStepWrong()


@detector("random-step", family="baseline", reference=True)
def random_step(seed: int = 0, span_threshold: float = 0.5) -> Detector:
    """Step-level baseline: a seeded uniform random correctness score per step (thresholded like a PRM).

    Args:
        seed: seed of the random scores.
        span_threshold: a step scored below this is an error (the first such step is the first error).
    """
    return RandomStep(int(seed), float(span_threshold))


@detector("prm", family="prm")
@takes_endpoint_options
def prm(
    model: str = "",
    backend: str = "openai",
    span_threshold: float = 0.5,
    format: str = "auto",
    max_batch_tokens: int = 0,
    *,
    endpoint: EndpointOptions,
    **options: Any,
) -> Detector:
    """Process reward model (transformers or vLLM /pooling): a correctness score per step, read as its authors do.

    Args:
        format: qwen2.5-math-prm, math-shepherd or sharp (input, model class and token read; see the module);
            auto picks it from the model's name.
        max_batch_tokens: padded tokens per batch of the transformers backend (rows times the longest); 0 picks
            the device's default.
    """
    return PRMDetector(model, backend, span_threshold, format, endpoint, max_batch_tokens=max_batch_tokens, **options)


@detector("critic", family="critic")
@takes_endpoint_options
def critic(
    model: str | None = None,
    mode: str = "steps",
    cache: bool = True,
    generation: dict[str, Any] | None = None,
    *,
    endpoint: EndpointOptions,
    **overrides: Any,
) -> Detector:
    """Prompted step critic (OpenAI-compatible chat): a verdict per step, or the first wrong step."""
    from shambench.llm.presets import generation_params

    if not model:
        raise DataError("--detector critic needs --model NAME (and --base-url URL for a local server)")
    made = endpoint_of(model, **endpoint)
    return CriticDetector(made, mode, generation_params(generation or {}, overrides), use_cache=bool(cache))
