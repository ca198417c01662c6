"""Zhou et al. (Findings of ACL 2021): token-level hallucination labels on XSum summaries and zh→en translations.

Reads `eval_data/` of violet-zct/fairseq-detect-hallucination: line i of every file of a system is one example.
The response is the released `.target` line exactly as it is (lower-cased and whitespace-tokenised, with the
release's `\\'` and `[UNK]` artefacts), because `.label` holds one 0/1 per whitespace token of that text. Each run
of consecutive `1` tokens becomes one character span, from the first token's start to the last token's end (the
spaces inside a run belong to it, as they would in a span a person marked). `summ` comes from the four XSum
systems (BERTS2S, PtGen, TConvS2S, TranS2S; their `Gold` reference summaries are not system output and are not
read), `mt` from the two MT systems (trans2s, mbart). The context is the `.source` line: the BBC article, or the
raw Chinese sentence. References (`.ref`) are not read, so no detector sees them. Ids are
`zhou/xsum-<system>/<BBC id>` and `zhou/mt-<system>/<line number>` (the MT files have no ids of their own).

Human agreement: Zhou's XSum labels are the token majority of Maynez et al.'s three workers, whose own spans are
the XSumFaith release (`shambench.adapters.xsumfaith`). When its folder is beside this one in the data directory,
each summary is joined to its (BBC id, system) there (the texts are identical) and gets its workers' readings
(`Example.annotations`): a worker's placed spans beside the tokens both other workers marked (the others'
majority), and whether the three workers' majority reproduces Zhou's released labels token for token.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from shambench.adapters import xsumfaith
from shambench.adapters._released import TOKEN, example_at, spans_of_labels, text_lines
from shambench.data.adapter import Adapter, LoadResult, RemoteFile, adapter
from shambench.errors import SourceError
from shambench.schema import Annotations, Example, Span
from shambench.sources import PAPER_SOURCE, PublishedCount

_COMMIT = "be14c9f378f8b9c0447c3b3d080263966d157b8c"
_RAW = f"https://raw.githubusercontent.com/violet-zct/fairseq-detect-hallucination/{_COMMIT}"


@dataclass(frozen=True)
class System:
    """One annotated system: where its parallel files are and which task it feeds."""

    corpus: str
    name: str
    task: str

    def file(self, ext: str) -> str:
        """Path of the system's `.ext` file below the source folder."""
        if self.corpus == "xsum":
            return f"eval_data/xsum/{self.name}/{self.name}.{ext}"
        return f"eval_data/mt/{self.name}.{ext}"

    @property
    def extensions(self) -> tuple[str, ...]:
        """The files read: XSum systems also have the BBC document ids."""
        return ("docid", "source", "target", "label") if self.corpus == "xsum" else ("source", "target", "label")


SYSTEMS = (
    System("xsum", "BERTS2S", "summ"),
    System("xsum", "PtGen", "summ"),
    System("xsum", "TConvS2S", "summ"),
    System("xsum", "TranS2S", "summ"),
    System("mt", "trans2s", "mt"),
    System("mt", "mbart", "mt"),
)
"""The six systems whose outputs are in the benchmark, in load order."""

# sha256 of each file at the commit above.
_SHA256 = {
    "eval_data/mt/mbart.label": "3bdd7bd517731cc88554e9ed23e29503b97c6de6bb596463e329cd412f1fb0fd",
    "eval_data/mt/mbart.source": "539c1238fb4135b8b40919c1404cf48992f58bc37ebc197ce097dcd1d3d77af3",
    "eval_data/mt/mbart.target": "7c69af6946d4c8a3d64ec96b49af6233e19d6b523941e913ce0c1ca5eda82df4",
    "eval_data/mt/trans2s.label": "25aee593c040c8bfa98f0b7bf09f41946830594a20286331df636d5d661efd97",
    "eval_data/mt/trans2s.source": "c750b94adfb89f4cac61314bab06852518ea0662ab39150d7d3565db36cd7ec9",
    "eval_data/mt/trans2s.target": "2e1ecc82f2ccc205aac0060cc763f4f3700719aa26f67deecc9a414bd6f05f54",
    "eval_data/xsum/BERTS2S/BERTS2S.docid": "ed5bb962eff6f4307e75cee5fa8e8e20b05d7e09c39104cf7a1213df2272631c",
    "eval_data/xsum/BERTS2S/BERTS2S.label": "7ed9aa6e7752e7366a61f0bcafe5d837d2e2c1427362b5c8268a615293f2e65d",
    "eval_data/xsum/BERTS2S/BERTS2S.source": "d5b5cabf9ca69ca7d6387ed8cf81dbef47b516bcfc41b2f51038cf2dde58db4a",
    "eval_data/xsum/BERTS2S/BERTS2S.target": "69e5c2b91bae4d55ff3a5402fb2fe8640706895fe17d80dde761a503e9e99f51",
    "eval_data/xsum/PtGen/PtGen.docid": "3228f56f70bf81728feeb657c69be2e3e4ecd2cc6cc3b3b1e3925b51f1295f98",
    "eval_data/xsum/PtGen/PtGen.label": "e6eef68dd0c0080493dafbdc7d0c213b8d95392e7a86d2f895d0c33d4469e628",
    "eval_data/xsum/PtGen/PtGen.source": "be23a07b064629fe07cf24fb3c4127a9360c8d9b8ad9ddc907ed393df14367bf",
    "eval_data/xsum/PtGen/PtGen.target": "333946566b61d5c93785f224164308b26b0c19c0fe75e01d7b02c0331d74615e",
    "eval_data/xsum/TConvS2S/TConvS2S.docid": "ac803b06db662dd657f48a1ec8adeba3ff61cb6cd62c6ee6a0c571d6977ff043",
    "eval_data/xsum/TConvS2S/TConvS2S.label": "27fac1511619ec03f089ec2035ac7e7605f1a9fd507756b3032c411003d825c7",
    "eval_data/xsum/TConvS2S/TConvS2S.source": "6ff39a169bcf987101e8d8c53cd0b7c2d1837547978a9cc2217074b5cab0d73a",
    "eval_data/xsum/TConvS2S/TConvS2S.target": "fb7c0046188a6debe7ad4efe4ad15f50cc5ba2266f14c6cfee08383a02f0de69",
    "eval_data/xsum/TranS2S/TranS2S.docid": "20759053dcc0c9fde73c29472fc449009d50cab1748841811a2e97b607160944",
    "eval_data/xsum/TranS2S/TranS2S.label": "36c3dfb785b27692b801e69fa54de816249f4304533d174c01277fe142794733",
    "eval_data/xsum/TranS2S/TranS2S.source": "78bfdd35970978edd81809941bc08f5c5c0caae557e51b066f36860a8b61c426",
    "eval_data/xsum/TranS2S/TranS2S.target": "0a10f5d415c99a5cabf81b6f7765d8200ac5ef9f7661f8046a24df5622a55b3b",
    # Not read here: the XSum articles of the Gold summaries, which the xsumfaith adapter reads.
    "eval_data/xsum/Gold/Gold.docid": "a6afc4a3104b1b19d8f2c41a91368003de4dc9ce23dc9612eb8d3a2a926bf9a6",
    "eval_data/xsum/Gold/Gold.source": "e686c7383a8e510d1c18b7dec42627d56db848186ffdfc24efbee7628c1b5e4d",
}


class ZhouAdapter(Adapter):
    """Zhou et al. 2021: four XSum summarisers (`summ`) and two zh→en MT systems (`mt`), token labels."""

    name = "zhou"
    tasks = ("summ", "mt")
    published_counts = {
        "mt/zhou": PublishedCount(count=479, source=PAPER_SOURCE),
        "summ/zhou": PublishedCount(count=1995, source=PAPER_SOURCE),
    }
    license = "MIT"
    homepage = "https://github.com/violet-zct/fairseq-detect-hallucination"
    revision = f"violet-zct/fairseq-detect-hallucination@{_COMMIT}"
    citation = (
        "Chunting Zhou, Graham Neubig, Jiatao Gu, Mona Diab, Francisco Guzmán, Luke Zettlemoyer, Marjan "
        "Ghazvininejad. Detecting Hallucinated Content in Conditional Neural Sequence Generation. "
        "Findings of ACL-IJCNLP 2021."
    )
    remote_files = tuple(RemoteFile(url=f"{_RAW}/{path}", path=path, sha256=sha) for path, sha in _SHA256.items())

    def available(self, data_dir: Path) -> bool:
        return (self.root(data_dir) / SYSTEMS[0].file("target")).is_file()

    def load(self, data_dir: Path, split: str = "test") -> LoadResult:
        self.check_split(split)
        root = self.root(data_dir)
        examples: list[Example] = []
        dropped: Counter[str] = Counter()
        workers = _workers(data_dir)
        for system in SYSTEMS:
            examples.extend(_system_examples(root, system, dropped, workers))
        files = [system.file(ext) for system in SYSTEMS for ext in system.extensions]
        return LoadResult(examples=examples, dropped=dict(dropped), files=files)


@adapter("zhou")
def zhou() -> Adapter:
    """Zhou et al. 2021: XSum summaries and zh→en translations with token-level hallucination labels."""
    return ZhouAdapter()


_RULE = (
    "Zhou (XSum): the gold is the tokens more than half of Maynez et al.'s three workers marked (XSumFaith, joined "
    "by BBC id and system); a worker's spans are placed on the summary by their text nearest the released offset "
    "(over the file's 2,500 summaries, Gold included: {placed})"
)


@dataclass(frozen=True)
class _Workers:
    """XSumFaith's summaries by (BBC id, system), and how their spans were placed."""

    summaries: dict[tuple[str, str], xsumfaith.AnnotatedSummary]
    rule: str


def _workers(data_dir: Path) -> _Workers | None:
    """The XSumFaith workers beside this source in the data directory, or None when that folder is absent."""
    root = data_dir / "xsumfaith"
    if not (root / xsumfaith.ANNOTATIONS).is_file():
        return None
    read = xsumfaith.read_annotations(root)
    counts = {
        **{f"placed by {k}": n for k, n in read.placed.items()},
        **{f"unplaced, {k}": n for k, n in read.unplaced.items()},
    }
    placed = "; ".join(f"{k} {n:,}" for k, n in counts.items()) + (
        f"; NULL rows ignored: {sum(read.ignored.values())}" if read.ignored else ""
    )
    return _Workers({(s.bbcid, s.system): s for s in read.summaries}, _RULE.format(placed=placed))


def _readings(workers: _Workers | None, system: str, key: str, target: str, labels: list[str]) -> Annotations | None:
    """The workers' readings of one XSum summary, when XSumFaith has it with the same text."""
    entry = workers.summaries.get((key, system)) if workers else None
    if workers is None or entry is None or entry.summary != target:
        return None

    def majority(span_lists: list[list[Span]]) -> list[Span]:
        # Zhou's rule, on whitespace tokens: a token is gold when more than half of the lists overlap it.
        return spans_of_labels(target, xsumfaith.majority_labels(target, span_lists))

    readings = Annotations.leave_one_out(entry.workers, majority, workers.rule)
    return readings.model_copy(update={"reproduces_gold": entry.majority_labels() == labels})


def _system_examples(
    root: Path, system: System, dropped: Counter[str], workers: _Workers | None = None
) -> list[Example]:
    columns = {ext: text_lines(root, system.file(ext), "zhou") for ext in system.extensions}
    counts = {system.file(ext): len(lines) for ext, lines in columns.items()}
    if len(set(counts.values())) > 1:
        listed = ", ".join(f"{root / path} has {n}" for path, n in counts.items())
        raise SourceError(f"line counts differ ({listed}); expected one line per example in every file")
    examples = []
    seen: set[str] = set()
    for lineno, target in enumerate(columns["target"], start=1):
        key = columns["docid"][lineno - 1].strip() if "docid" in columns else str(lineno)
        labels = columns["label"][lineno - 1].split()
        reason = _defect(target, labels, key, seen)
        if reason:
            dropped[reason] += 1
            continue
        seen.add(key)
        where = f"{root / system.file('docid' if 'docid' in columns else 'target')}:{lineno}"
        examples.append(
            example_at(
                where,
                id=f"zhou/{system.corpus}-{system.name}/{key}",
                dataset="zhou",
                task=system.task,
                context=columns["source"][lineno - 1],
                response=target,
                hallu_spans=spans_of_labels(target, labels),
                annotations=_readings(workers, system.name, key, target, labels) if system.corpus == "xsum" else None,
                meta={"system": system.name, "corpus": system.corpus, "line": lineno},
            )
        )
    return examples


def _defect(target: str, labels: list[str], key: str, seen: set[str]) -> str | None:
    """Why a line cannot be used, or None when it is sound."""
    if not target.strip():
        return "empty target"
    if key in seen:
        return "duplicate document id within a system"
    if any(lab not in ("0", "1") for lab in labels):
        return "label other than 0 or 1"
    if len(labels) != len(TOKEN.findall(target)):
        return "label count differs from the target's token count"
    return None
