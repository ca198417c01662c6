"""The span-marking prompt of the prompted detectors, its JSON output schema, and a tolerant reader of replies.

The prompt follows the structure of the SHAM-Bench appendix prompt (task, JSON output of verbatim substrings in
order, short spans, an empty list when all is supported, four worked examples); the wording and the examples are
our own. `PROMPT_HASH` identifies the template: it is recorded with every prediction and in the run config, and it
changes whenever a word of the prompt does.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, NamedTuple

from shambench.llm.replies import FENCE, THINK, preview, reply_json_values
from shambench.schema import Example
from shambench.structured import json_value

SYSTEM = """\
You check answers for hallucinations. You get a question or instruction, sometimes information that the answer \
must be based on, and the answer. Find every part of the answer that is not supported: a detail that contradicts \
the question or the information, that the information does not contain, or, when no information is given, that \
is false according to well-established knowledge.

Reply with JSON only, in this form: {"incorrect_spans": ["...", "..."]}
- Copy each span exactly, character for character, from the answer: same spelling, case and punctuation.
- The answer may be in any language or script: keep the answer's language, never translate, transliterate or \
normalise a span; quote it verbatim as it appears in the answer.
- List the spans in the order they appear in the answer.
- Keep spans short: the smallest phrase that is wrong (a name, a number, a date, a few words). Mark a whole \
sentence only when all of it is unsupported. Never include correct text around the error.
- If everything in the answer is supported, reply {"incorrect_spans": []}."""

# (question, information, answer, spans): one wrong fact from knowledge; two wrong details against a passage; a
# translation with one wrong word; a faithful summary with nothing to mark.
WORKED_EXAMPLES: list[tuple[str, str, str, list[str]]] = [
    (
        "What is the capital of Australia, and which ocean lies to its west?",
        "",
        "The capital of Australia is Sydney, and the Indian Ocean lies to its west.",
        ["Sydney"],
    ),
    (
        "When did the library open, and how many books does it hold?",
        "The Harwick Library opened in 1962 on Elm Street. It holds about 40,000 books and is closed on Mondays.",
        "The Harwick Library opened in 1926 on Elm Street and holds about 400,000 books.",
        ["1926", "400,000"],
    ),
    (
        "Translate into English: Le chat noir dort sur la chaise de la cuisine.",
        "",
        "The black dog is sleeping on the kitchen chair.",
        ["dog"],
    ),
    (
        "Summarise the article in one sentence.",
        "On Tuesday the town council voted to keep the public swimming pool open until 9 pm during the summer "
        "months. The longer hours begin in June and will be reviewed in September.",
        "The council voted to keep the public pool open until 9 pm in summer, starting in June.",
        [],
    ),
]

OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"incorrect_spans": {"type": "array", "items": {"type": "string"}}},
    "required": ["incorrect_spans"],
    "additionalProperties": False,
}

RESPONSE_FORMAT: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {"name": "incorrect_spans", "strict": True, "schema": OUTPUT_SCHEMA},
}


def _section(tag: str, text: str) -> str:
    return f"<{tag}>\n{text}\n</{tag}>"


def case_text(question: str, context: str, response: str) -> str:
    """One case as the model sees it: question, information (when there is any) and answer, in tagged blocks."""
    parts = [_section("question", question.strip() or "(none)")]
    if context.strip():
        parts.append(_section("information", context.strip()))
    parts.append(_section("answer", response))
    return "\n".join(parts)


def _worked_examples() -> str:
    blocks = []
    for i, (question, context, answer, spans) in enumerate(WORKED_EXAMPLES, start=1):
        reply = json.dumps({"incorrect_spans": spans}, ensure_ascii=False)
        blocks.append(f"Example {i}\n{case_text(question, context, answer)}\nReply: {reply}")
    return "\n\n".join(blocks)


SYSTEM_WITH_EXAMPLES = f"{SYSTEM}\n\n{_worked_examples()}"
USER_PREFIX = "Check this answer.\n"
PROMPT_HASH = hashlib.sha256((SYSTEM_WITH_EXAMPLES + "\x00" + USER_PREFIX).encode()).hexdigest()[:16]


def messages_for(example: Example) -> list[dict[str, str]]:
    """The chat messages asking for the incorrect spans of one example's response."""
    return [
        {"role": "system", "content": SYSTEM_WITH_EXAMPLES},
        {"role": "user", "content": USER_PREFIX + case_text(example.question, example.context, example.response)},
    ]


def _as_strings(items: list[Any]) -> list[str]:
    out = []
    for item in items:
        if isinstance(item, dict):
            item = item.get("text", item.get("span"))
        if not isinstance(item, str):
            raise ValueError(f"span {item!r} is not a string")
        out.append(item)
    return out


class ParsedReply(NamedTuple):
    """The span strings of a reply, and which documented form they came in."""

    spans: list[str]
    form: str
    """`object` (`{"incorrect_spans": [...]}`) or `bare_list` (the fallback: the whole reply is one JSON list)."""


def parse_reply(text: str) -> ParsedReply:
    """The strings of a reply, read strictly: the last `{"incorrect_spans": [...]}` object (possibly in a code
    fence, after a `<think>` block or amid prose); or, as the one fallback, a reply that is nothing but a JSON list
    of strings (possibly fenced). A list amid other text (code, prose) is no answer. ValueError when there is none."""
    values = reply_json_values(text)
    keyed = [v["incorrect_spans"] for v in values if isinstance(v, dict) and isinstance(v.get("incorrect_spans"), list)]
    if keyed:
        return ParsedReply(_as_strings(keyed[-1]), "object")
    whole = THINK.sub("", text).strip()
    fenced = FENCE.fullmatch(whole)
    try:
        bare = json_value(fenced.group(1) if fenced else whole, "the output", "a JSON list of strings")
    except ValueError:
        bare = None
    if isinstance(bare, list) and all(isinstance(x, str | dict) for x in bare):
        return ParsedReply(_as_strings(bare), "bare_list")
    raise ValueError(f'no {{"incorrect_spans": [...]}} object in the output ({preview(text)})')


def parse_spans(text: str) -> list[str]:
    """The strings of a reply (see `parse_reply`)."""
    return parse_reply(text).spans
