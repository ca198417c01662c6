"""FELM (Chen et al., NeurIPS 2023 Datasets and Benchmarks): segment-level factuality labels on ChatGPT answers.

Reads the five JSON-lines files of `data/test/` at hkust-nlp/felm@bdb2936 (`wk`, `science`, `math`,
`reasoning`, `writing_rec`: world knowledge, science/technology, math, reasoning, writing/recommendation), one
ChatGPT response per line with `segmented_response` (the segments the annotators judged), `labels` (one boolean
per segment, `false` = the segment contains a factual error) and, for some rows, `type` (one error type per
segment). All 847 responses form one partition, `open_qa_long/felm` (long-form answers to open prompts without
a source document, as `open_qa_long/haluquestqa`), with the domain in `meta["domain"]`: the domains are the
prompts' categories under one annotation protocol, not separate corpora, FELM's own headline figure is over all
of them, and at 125-208 responses each, per-domain partitions would each carry a wide interval; a per-domain
figure is one filter on `meta["domain"]` away.

Gold: every segment labelled `false` is one span of the response. Segments are not released as offsets: each
response's segments are placed in order as quoted strings are (`shambench.detection.locate`: exact, then ignoring
case and whitespace, then fuzzily, each after the previous segment first), the segments labelled `true` too,
only so that the cursor walks the response; the `false` ones are counted by outcome in `LoadResult.spans`
(`placed: <method>`, `ambiguous: ...` when the segment's text occurs more than once, or `unplaced: ...`). A
response whose `false` segment cannot be placed is dropped, counted, since its gold would be incomplete.

Error types (`Span.label`), FELM's four (the paper's Section 3): `knowledge_error` -> `knowledge`,
`reasoning_error` -> `reasoning`, `irrelevant_with_qst` -> `irrelevant` (irrelevant to the question), `fooled`
-> `fooled` (misled by a false premise of the prompt). Only `wk`, `science`, `writing_rec` and some `reasoning`
and `math` rows have a `type` list; a `false` segment without a type is a span without a label (it counts in
every figure but the per-type ones).

Measured on the release (847 rows, 4,425 segments, 806 `false`): dropped are the 2 rows whose `response` is not
text (NaN in the release) and the 7 `reasoning` rows whose `labels` list is longer than their segments (which
label belongs to which segment is unknown). The 838 kept responses hold 772 `false` segments: 739 placed verbatim,
4 ignoring case and whitespace, 29 fuzzily (the release writes some newlines as a literal `\\n`, and GSM8K's
`<<...>>` calculator notes differ), none unplaced. Ids are `felm/<domain>/<index>`.

Segments are sentence-like claims, so the gold marks whole sentences, never the erroneous phrase within one: a
test of sentence-level detectors, whose token F1 against it rewards flagging whole claims.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from shambench.adapters._released import example_at, jsonl_rows, placement_outcomes, source_file
from shambench.data.adapter import Adapter, LoadResult, RemoteFile, adapter
from shambench.detection.locate import Placement, locate
from shambench.errors import SourceError
from shambench.schema import Example, Model
from shambench.sources import PublishedCount

TASK = "open_qa_long"
_COMMIT = "bdb2936639cb01c81ea60bc7926928c63ad2dd52"
_RAW = f"https://raw.githubusercontent.com/hkust-nlp/felm/{_COMMIT}/data/test"
# Domain (file stem) -> SHA-256 of the file at that commit (SOURCE.md; checked against the repository's history).
DOMAINS = {
    "wk": "d32f3273a8137232809543f830452a34c2505c710173426c4cafa43ba914c9f0",
    "science": "12a2bed008e418d5cb86c59960f61dadeeeaad4b1d9925c1432aba0801d4306e",
    "math": "de7598efa5aa846c0ced052f1b63def32ee97f7e20048c10c4ea9c858a4557fa",
    "reasoning": "1314caf041e64dcbabd3b34ab616945d5d150ef01c0bc08fbd6bc48df289df58",
    "writing_rec": "a482d11f3bf7cf9118c09ecf7dceec03060844545f80bc574cc142240af6ed84",
}
ERROR_TYPES = {
    "knowledge_error": "knowledge",
    "reasoning_error": "reasoning",
    "irrelevant_with_qst": "irrelevant",
    "fooled": "fooled",
}
"""FELM's error types as released -> the span label (the type) this adapter gives them."""
EXPECTED = (
    "FELM's JSON lines with index, source, prompt, response, segmented_response, labels (one boolean per segment) "
    "and, on some rows, type (one error type or null per segment)"
)

NOT_TEXT = "response is not text (NaN in the release)"
LENGTHS = "labels and segmented_response differ in length"
UNPLACED = "response with a false segment not found in it (its gold would be incomplete)"
NOT_FOUND = "not found in its response"
AMBIGUOUS = "text occurs more than once in the response (placed after the previous segment)"


class FelmRow(Model):
    """One line of a FELM file: a prompt, ChatGPT's response and its labelled segments."""

    index: str
    """The row's number within its domain's file."""
    source: str
    """Where the prompt comes from (`truthfulQA`, `GSM8K`, `chatgpt`, a URL, ...)."""
    prompt: str
    """The prompt ChatGPT answered."""
    response: str | float
    """The full response (a float NaN on two released rows)."""
    segmented_response: list[str]
    """The segments the annotators labelled, in order."""
    labels: list[bool]
    """One per segment: false when the segment contains a factual error."""
    type: list[str | None] | None = None
    """One error type per segment (null or empty for a correct one), on the rows that have it."""


class FelmAdapter(Adapter):
    """Reads FELM's five domain files: segments labelled `false` as gold spans, typed by error."""

    name = "felm"
    tasks = (TASK,)
    span_types = tuple(ERROR_TYPES.values())
    suite = "extended"
    kept_apart = f"{TASK}/felm"
    published_counts = {
        f"{TASK}/felm": PublishedCount(
            count=847,
            source='Chen et al. 2023, FELM README (hkust-nlp/felm@bdb2936): "Number of Instances | 847" (one ChatGPT '
            "response each, in five domains)",
        )
    }
    license = "CC BY-NC-SA 4.0 (data; the code is MIT)"
    homepage = "https://github.com/hkust-nlp/felm"
    revision = f"hkust-nlp/felm@{_COMMIT[:7]} (data/test/*.jsonl, 2023-09-17; removed from the repository later)"
    citation = (
        "Shiqi Chen, Yiran Zhao, Jinghan Zhang, I-Chun Chern, Siyang Gao, Pengfei Liu, Junxian He. FELM: Benchmarking "
        "Factuality Evaluation of Large Language Models. NeurIPS 2023 Datasets and Benchmarks."
    )
    remote_files = tuple(
        RemoteFile(url=f"{_RAW}/{domain}.jsonl", path=f"{domain}.jsonl", sha256=digest)
        for domain, digest in DOMAINS.items()
    )

    def available(self, data_dir: Path) -> bool:
        return all((self.root(data_dir) / f"{domain}.jsonl").is_file() for domain in DOMAINS)

    def load(self, data_dir: Path, split: str = "test") -> LoadResult:
        self.check_split(split)
        examples: list[Example] = []
        dropped: Counter[str] = Counter()
        spans: Counter[str] = Counter()
        for domain in DOMAINS:
            path = source_file(self.root(data_dir), f"{domain}.jsonl", self.name, EXPECTED)
            for where, row in jsonl_rows(path, FelmRow, EXPECTED):
                response = row.response
                if not isinstance(response, str):
                    dropped[NOT_TEXT] += 1
                    continue
                if len(row.labels) != len(row.segmented_response):
                    dropped[LENGTHS] += 1
                    continue
                placements = locate(response, row.segmented_response)
                errors = [(p, t) for p, t, ok in zip(placements, _types(where, row), row.labels) if not ok]
                spans.update(placement_outcomes(response, [p for p, _ in errors], NOT_FOUND, AMBIGUOUS))
                if not all(p.placed for p, _ in errors):
                    dropped[UNPLACED] += 1
                    continue
                examples.append(_example(where, domain, row, response, errors))
        files = [f"{domain}.jsonl" for domain in DOMAINS]
        return LoadResult(examples=examples, dropped=dict(dropped), files=files, spans=dict(spans))


@adapter("felm")
def felm() -> Adapter:
    """FELM (Chen et al. 2023): ChatGPT answers in five domains, false segments as gold (suite `extended`)."""
    return FelmAdapter()


def _types(where: str, row: FelmRow) -> list[str | None]:
    """The span label of each segment: its error type as `ERROR_TYPES` names it, None where the row gives none."""
    if row.type is None:
        return [None] * len(row.labels)
    if len(row.type) != len(row.labels):
        raise SourceError(f"{where}: type has {len(row.type)} entries for {len(row.labels)} labels ({EXPECTED})")
    unknown = {t for t in row.type if t and t not in ERROR_TYPES}
    if unknown:
        raise SourceError(f"{where}: unknown error type(s) {sorted(unknown)}; FELM's are {', '.join(ERROR_TYPES)}")
    return [ERROR_TYPES[t] if t else None for t in row.type]


def _example(
    where: str, domain: str, row: FelmRow, response: str, errors: list[tuple[Placement, str | None]]
) -> Example:
    return example_at(
        where,
        id=f"felm/{domain}/{row.index}",
        dataset="felm",
        task=TASK,
        question=row.prompt,
        response=response,
        hallu_spans=[p.as_span(label) for p, label in errors],
        meta={"domain": domain, "source": row.source, "index": row.index},
    )
