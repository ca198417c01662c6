"""Generative taggers: fine-tuned LLMs served behind an OpenAI-compatible completions endpoint (e.g. vLLM).

- `fava` — FAVA (Mishra et al. 2024, fava-uw/fava-model) as its inference script runs it (github abhika-m/FAVA,
  commit 7ec08c2, `eval/run_fava.py`): its `INPUT` prompt with the references as one string and the response after
  `[Text] `, greedy decoding (temperature 0, top_p 1.0), 1024 new tokens. The model rewrites the response with
  its errors wrapped in type tags (`<entity>`, `<relation>`, `<contradictory>`, `<invented>`, `<subjective>`,
  `<unverifiable>`) in the form of its training completions (`training/process_train_data.py`, `swap_error_tags`
  in `utils.py`): the response's own erroneous text in `<delete>`, a suggested replacement in `<mark>`, and a
  contradictory sentence as `<contradictory><delete>...</delete><contradictory>` (the swap turns every closing
  `</contradictory>` into `</delete><contradictory>`; `official_tags` reads that second opener as the closer).
  The tags are then read with the FAVABench adapter's parser; when the rewrite reproduces the response (up to
  whitespace) the spans are moved onto it by alignment, otherwise each tagged string is placed in the response by
  `shambench.detection.locate`. Spans carry FAVA's error type as label. FAVA's own evaluation
  (`eval/run_eval.py --metric detection`) scores tag presence per spaCy sentence, not spans, so the span reading
  is shambench's. Differences: the repository's other entry, `eval/run_eval.py`, means to number several
  references ("Reference [1]: ...", as the training prompts do) but cannot run (it appends to an undefined
  `prompt` and formats the Python list of references); shambench follows `run_fava.py` and sends the example's
  context as it is. With `-p question_as_evidence=true` (off by default) an example without a context sends its
  question as the reference; FAVA's script sends an empty reference.
- `ragtruth-tagger` — the RAGTruth baseline fine-tune (Llama-2-13B in the paper) as ParticleMedia/RAGTruth
  (commit c103204) runs it in `baseline/predict_and_evaluate.py`: the task's template from `baseline/dataset.py`
  in `[INST] {prompt.strip()} [/INST]`, sampled with temperature 0.05, top_p 0.95, top_k 40 and 512 new tokens;
  the whole reply, stripped, must parse as JSON (`json.loads`) and its `"hallucination list"` is read (training
  targets are `json.dumps({"hallucination list": [...]}, indent=2)`). The script retries an unparsable reply up
  to ten times; here such a reply is an unusable output, re-asked by `--resume`. `-p parse=lenient` (off by
  default) takes instead the last JSON dict with that key anywhere in the reply. Each listed string is placed in
  the response with `shambench.detection.locate` (the script evaluates only whether the list is empty, so
  placement is shambench's). The template's `{reference}` is what `baseline/prepare_dataset.py` puts there,
  which the RAGTruth adapter keeps in `meta["reference"]`: the QA passages and the article as released, and
  `str()` of a data-to-text record (a Python dict repr); `{question}` and `{response}` are the example's (no
  question of the test split or of FaithJudge's copy has white space around it for the adapter to strip). The
  prompts are byte-identical to the script's on all 2,675 test responses (`tests/detectors/
  test_generative_tagger.py`). Examples of other sources, which have no `meta["reference"]`, send their context.

Requests go through `shambench.llm.client` (bounded concurrency, retries, the response cache), so a rerun is served from
the cache and `--resume` re-asks only what failed. Every prediction records the prompt template's hash.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from shambench.detection.detector import Detector, detector
from shambench.errors import DataError
from shambench.llm.api import APIDetector
from shambench.llm.endpoint import EndpointOptions, endpoint_of, takes_endpoint_options
from shambench.schema import Example, Prediction, Span
from shambench.structured import json_value

FAVA_TEMPLATE = (
    "Read the following references:\n{evidence}\n"
    "Please identify all the errors in the following text using the information in the references provided "
    "and suggest edits if necessary:\n[Text] {output}\n[Edited] "
)
_RAGTRUTH_TASK = (
    "Your task is to determine whether the summary contains either or both of the following two types of "
    "hallucinations:\n"
    "1. conflict: instances where the summary presents direct contraction or opposition to the original news;\n"
    "2. baseless info: instances where the generated summary includes information which is not substantiated by "
    "or inferred from the original news. \n"
    'Then, compile the labeled hallucinated spans into a JSON dict, with a key "hallucination list" and its value '
    "is a list of hallucinated spans. If there exist potential hallucinations, the output should be in the "
    'following JSON format: {{"hallucination list": [hallucination span1, hallucination span2, ...]}}. '
    'Otherwise, leave the value as a empty list as following: {{"hallucination list": []}}.\n'
    "Output:"
)
RAGTRUTH_TEMPLATES = {
    "QA": "Below is a question:\n{question}\n\nBelow are related passages:\n{reference}\n\n"
    "Below is an answer:\n{response}\n\n" + _RAGTRUTH_TASK,
    "Summary": "Below is the original news:\n{reference}\n\nBelow is a summary of the news:\n{response}\n"
    + _RAGTRUTH_TASK,
    "Data2txt": "Below is a structured data in the JSON format:\n{reference}\n\n"
    "Below is an overview article written in accordance with the structured data:\n{response}\n\n" + _RAGTRUTH_TASK,
}
"""RAGTruth's per-task templates; shambench tasks map to them in `ragtruth_task`."""


def template_hash(*templates: str) -> str:
    """A short hash of prompt templates, recorded with every prediction."""
    return hashlib.sha256("\0".join(templates).encode()).hexdigest()[:12]


def ragtruth_task(example: Example) -> str:
    """The RAGTruth template for an example: data-to-text and summaries by task, else QA when there is a question."""
    if example.task == "data2txt":
        return "Data2txt"
    if example.task == "summ" or not example.question:
        return "Summary"
    return "QA"


def option_value(name: str, given: Any, allowed: tuple[Any, ...]) -> Any:
    """`given` as one of `allowed` (booleans also from "true"/"false"), the default when None; DataError otherwise."""
    if given is None:
        return allowed[0]
    if isinstance(allowed[0], bool) and isinstance(given, str) and given.lower() in ("true", "false"):
        given = given.lower() == "true"
    if given not in allowed:
        raise DataError(f"-p {name}={given!r}: use one of {', '.join(map(str, allowed))}")
    return given


def official_tags(text: str) -> str:
    """FAVA's output with the contradictory-sentence closer its training data teaches (`</delete><contradictory>`)
    written as the closing tag it stands for."""
    return text.replace("</delete><contradictory>", "</delete></contradictory>")


class GenerativeTagger(APIDetector):
    """Base of the taggers: one completion per example, parsed into strings or spans and placed in the response."""

    family = "generative-tagger"
    templates: tuple[str, ...] = ()
    """The prompt templates (their hash is recorded)."""
    filling: str = ""
    """How the templates' fields are filled, where that has changed: hashed with them, so that a run whose prompts
    were filled otherwise is not resumed with these."""

    options: dict[str, tuple[Any, ...]] = {}
    """The tagger's own options and their allowed values, the first its default (the official behaviour)."""

    def __init__(
        self,
        endpoint: Any,
        generation: dict[str, Any],
        min_similarity: float,
        use_cache: bool = True,
        **chosen: Any,
    ):
        super().__init__(endpoint, use_cache)
        self.generation = generation
        self.min_similarity = min_similarity
        self.chosen = {name: option_value(name, chosen.get(name), allowed) for name, allowed in self.options.items()}

    @classmethod
    def template_hash(cls) -> str:
        """Hash of the tagger's templates (and of their filling, when it names one)."""
        return template_hash(*cls.templates, *([cls.filling] if cls.filling else []))

    @property
    def prompt_hash(self) -> str:
        """Hash of this tagger's templates."""
        return self.template_hash()

    def params(self) -> dict[str, Any]:
        # The factory's own keywords, so that `--resume` rebuilds the same detector.
        return {
            **super().params(),
            "generation": self.generation,
            "min_similarity": self.min_similarity,
            "prompt_hash": self.prompt_hash,
            **self.chosen,
        }

    def prompt(self, example: Example) -> str:
        """The completion prompt for one example."""
        raise NotImplementedError

    def parse(self, completion: Any) -> Any:
        """What the model's text says (ValueError when it says nothing usable)."""
        raise NotImplementedError

    def spans(self, example: Example, parsed: Any) -> tuple[list[Span], list[str]]:
        """Spans on the response, and the strings that could not be placed."""
        raise NotImplementedError

    async def predict_one(self, client: Any, example: Example) -> Prediction:
        from shambench.llm.client import LLMError

        meta: dict[str, Any] = {"prompt_hash": self.prompt_hash}
        try:
            reply = await client.complete(self.prompt(example), self.generation, accept=self.parse)
        except LLMError as err:
            meta["usage"] = err.usage.model_dump()
            return Prediction(id=example.id, error=err.reason, raw=err.text, meta=meta)
        spans, unplaced = self.spans(example, reply.parsed)
        if unplaced:
            client.on_count("unplaced", len(unplaced))
        meta.update(request=reply.key, usage=reply.usage.model_dump(), finish_reason=reply.finish_reason)
        meta.update(unplaced=unplaced, n_unplaced=len(unplaced))
        return Prediction(id=example.id, spans=spans, raw=reply.text, meta=meta)

    def placed(self, example: Example, texts: Sequence[str], labels: Sequence[str | None]) -> tuple[list, list]:
        """Strings placed in the response by `shambench.detection.locate`, with their labels; and those not placed."""
        from shambench.detection.locate import locate

        placements = locate(example.response, list(texts), self.min_similarity)
        spans = [p.as_span(lab) for p, lab in zip(placements, labels) if p.placed]
        return spans, [p.text for p in placements if not p.placed]


class FavaTagger(GenerativeTagger):
    """FAVA: the response rewritten with typed error tags."""

    templates = (FAVA_TEMPLATE,)
    options = {"question_as_evidence": (False, True)}

    def prompt(self, example: Example) -> str:
        evidence = example.context or (example.question if self.chosen["question_as_evidence"] else "")
        return FAVA_TEMPLATE.format(evidence=evidence, output=example.response)

    def parse(self, completion: Any) -> Any:
        from shambench.adapters.fava import parse_annotated

        return parse_annotated(official_tags(completion.text))

    def spans(self, example: Example, parsed: Any) -> tuple[list[Span], list[str]]:
        from shambench.adapters.fava import spans_on_output

        moved = spans_on_output(parsed, example.response.strip())
        if moved is not None:
            # The rewrite reproduced the response: exact offsets (shifted past any leading whitespace).
            lead = len(example.response) - len(example.response.lstrip())
            return [Span(start=s + lead, end=e + lead, label=kind) for s, e, kind in moved], []
        texts = [parsed.clean[s:e] for s, e, _ in parsed.spans]
        return self.placed(example, texts, [kind for _, _, kind in parsed.spans])


def parse_hallucination_list(text: str, lenient: bool = False) -> list[str]:
    """The non-blank strings of `{"hallucination list": [...]}`: the whole stripped reply parsed as JSON, as
    RAGTruth's script does, or (lenient) the last such dict anywhere in it; ValueError when there is none."""
    from shambench.llm.replies import reply_json_values

    if lenient:
        values = list(reversed(reply_json_values(text)))
    else:
        try:
            values = [json_value(text.strip(), "the output", 'a {"hallucination list": [...]} object')]
        except ValueError:
            values = []
    for value in values:
        if isinstance(value, dict) and isinstance(value.get("hallucination list"), list):
            return [str(v) for v in value["hallucination list"] if str(v).strip()]
    where = "in" if lenient else "as"
    raise ValueError(f'no {{"hallucination list": [...]}} {where} the output')


class RagTruthTagger(GenerativeTagger):
    """The RAGTruth fine-tune: hallucinated spans listed as text in a JSON dict."""

    templates = tuple(RAGTRUTH_TEMPLATES.values())
    filling = "reference: meta['reference'] (the baseline's), else the context"
    options = {"parse": ("strict", "lenient")}

    def prompt(self, example: Example) -> str:
        reference = example.meta.get("reference", example.context)
        body = RAGTRUTH_TEMPLATES[ragtruth_task(example)].format(
            question=example.question, reference=reference, response=example.response
        )
        return f"[INST] {body.strip()} [/INST]"

    def parse(self, completion: Any) -> list[str]:
        return parse_hallucination_list(completion.text, lenient=self.chosen["parse"] == "lenient")

    def spans(self, example: Example, parsed: list[str]) -> tuple[list[Span], list[str]]:
        return self.placed(example, parsed, [None] * len(parsed))


TAGGERS = {"fava": FavaTagger, "ragtruth-tagger": RagTruthTagger}
DEFAULT_GENERATION: dict[str, dict[str, Any]] = {
    # FAVA's inference script: greedy, 1024 new tokens.
    "fava": {"max_tokens": 1024, "temperature": 0.0, "top_p": 1.0},
    # RAGTruth's own prediction script samples with these settings and 512 new tokens.
    "ragtruth-tagger": {"max_tokens": 512, "temperature": 0.05, "top_p": 0.95, "extra_body": {"top_k": 40}},
}
DEFAULT_MODELS = {"fava": "fava-uw/fava-model", "ragtruth-tagger": ""}


def make_tagger(
    name: str,
    endpoint: EndpointOptions,
    model: str | None = None,
    generation: dict[str, Any] | None = None,
    min_similarity: float | None = None,
    cache: bool = True,
    question_as_evidence: Any = None,
    parse: str | None = None,
    **overrides: Any,
) -> GenerativeTagger:
    """A tagger from its name, the endpoint options and generation overrides (`-p max_tokens=...`)."""
    from shambench.detection.locate import MIN_SIMILARITY
    from shambench.llm.presets import generation_params

    cls = TAGGERS[name]
    model = model or DEFAULT_MODELS[name]
    if not model or not endpoint.get("base_url"):
        raise DataError(f"--detector {name} needs --base-url of the server (vLLM) and --model as it serves it")
    made = endpoint_of(model, **endpoint)
    body = generation_params(DEFAULT_GENERATION[name] if generation is None else generation, overrides)
    similarity = MIN_SIMILARITY if min_similarity is None else float(min_similarity)
    given_options = {"question_as_evidence": question_as_evidence, "parse": parse}
    unknown = [k for k, v in given_options.items() if v is not None and k not in cls.options]
    if unknown:
        raise DataError(f"unknown parameter {unknown[0]!r} for --detector {name}")
    return cls(made, body, similarity, use_cache=bool(cache), **given_options)


@detector("fava")
@takes_endpoint_options
def fava(*, endpoint: EndpointOptions, **params: Any) -> Detector:
    """FAVA (fava-uw/fava-model via vLLM, --base-url): errors tagged by type in its rewrite, parsed into spans.

    Args:
        question_as_evidence: send the question as the reference when an example has no context (FAVA's script
            sends an empty one); false by default.
    """
    return make_tagger("fava", endpoint, **params)


@detector("ragtruth-tagger")
@takes_endpoint_options
def ragtruth_tagger(*, endpoint: EndpointOptions, **params: Any) -> Detector:
    """RAGTruth's fine-tuned baseline via vLLM (--base-url, --model): hallucinated spans listed as text.

    Args:
        parse: strict (the whole reply is the JSON dict, as RAGTruth's script reads it) or lenient (the last
            such dict anywhere in the reply).
    """
    return make_tagger("ragtruth-tagger", endpoint, **params)
