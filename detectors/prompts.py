"""The span-marking prompt of the prompted detectors, its JSON output schema, and a tolerant reader of replies.

The prompt follows the structure of the SHAM-Bench appendix prompt (task, JSON output of verbatim substrings in
order, short spans, an empty list when all is supported, four worked examples); the wording and the examples are
our own. `PROMPT_HASH` identifies the template: it is recorded with every prediction and in the run config, and it
changes whenever a word of the prompt does.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from shambench.schema import Example

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


_FENCE = re.compile(r"```[A-Za-z]*\s*\n?(.*?)```", re.DOTALL)
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)


def _json_values(text: str) -> list[Any]:
    """Every JSON object or array that starts at a `{` or `[` of the text and parses, in order."""
    decoder = json.JSONDecoder()
    found = []
    i = 0
    while i < len(text):
        if text[i] in "{[":
            try:
                value, end = decoder.raw_decode(text, i)
            except ValueError:
                i += 1
                continue
            found.append(value)
            i = end
        else:
            i += 1
    return found


def _as_strings(items: list[Any]) -> list[str]:
    out = []
    for item in items:
        if isinstance(item, dict):
            item = item.get("text", item.get("span"))
        if not isinstance(item, str):
            raise ValueError(f"span {item!r} is not a string")
        out.append(item)
    return out


def reply_json_values(text: str) -> list[Any]:
    """The JSON values of a model reply, after any `<think>` block: those inside code fences when there are
    any, else all in the text. ValueError when the reasoning block never ended (the output was cut off)."""
    if "<think>" in text and "</think>" not in text:
        raise ValueError("the reasoning block never ended (</think> missing): the output was probably cut off")
    text = _THINK.sub("", text)
    return [v for block in _FENCE.findall(text) for v in _json_values(block)] or _json_values(text)


def parse_spans(text: str) -> list[str]:
    """The strings of a reply: `{"incorrect_spans": [...]}` possibly in a code fence, after a `<think>` block or
    amid prose, or a bare JSON list; the last such value wins. ValueError when there is none."""
    values = reply_json_values(text)
    keyed = [v["incorrect_spans"] for v in values if isinstance(v, dict) and isinstance(v.get("incorrect_spans"), list)]
    if keyed:
        return _as_strings(keyed[-1])
    lists = [v for v in values if isinstance(v, list) and all(isinstance(x, str | dict) for x in v)]
    if lists:
        return _as_strings(lists[-1])
    raise ValueError(f"no JSON list of spans in the output ({_preview(text)})")


def _preview(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[:limit] + "…")
