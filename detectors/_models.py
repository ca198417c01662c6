"""Helpers shared by the model-backed detectors: device choice, safe loading, token-budget batches, pair inputs
and padding.

Everything here imports torch/transformers inside functions, so that importing the detector modules (which
`shambench list detectors` does) never imports torch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from shambench.errors import DataError

T = TypeVar("T")
R = TypeVar("R")
DEVICES = ("auto", "cpu", "cuda", "mps")
CPU_BATCH_TOKENS = 512
"""A CPU batch's padded tokens by default: an input of more than 256 tokens runs alone, shorter ones (sentences,
short pairs) several to a batch. On one core a base-size model gains nothing from stacking long inputs and pays
for their padding: LettuceDetect on a ModernBERT-base-size checkpoint took 0.91x the package's CPU time alone,
0.93x at 1,024 tokens and 1.00x at 4,096 (max length 4096), 0.98x at 512 and 1.06x at 4,096 (max length 512);
`benchmarks/RESULTS.md`, issue #46."""
ACCELERATOR_BATCH_TOKENS = 65_536
"""A GPU's (or MPS's) batch by default: wide batches keep it busy; 64k tokens of a base-size encoder fit in a few GB."""
EXAMPLES_PER_PASS = 64
"""Examples whose model inputs are sorted and batched together: more sort better, fewer let the journal advance."""


def pick_device(device: str = "auto") -> Any:
    """A torch device: `auto` picks CUDA when present, else CPU; `cuda:1` style indices are accepted."""
    import torch

    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.split(":")[0] not in DEVICES[1:]:
        raise DataError(f"unknown device {device!r}: expected one of {', '.join(DEVICES)} (or cuda:N)")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise DataError(f"device {device!r} asked for, but torch sees no CUDA device")
    return torch.device(device)


def quiet_transformers() -> None:
    """Silence transformers' own progress bars and notices."""
    from transformers.utils import logging

    # Its tqdm bars would tear through shambench's rich progress display, and its notices (a new head
    # initialised, a prompt longer than the model's limit before windowing) are expected here.
    logging.disable_progress_bar()
    logging.set_verbosity_error()


def load_pretrained(loader: Any, source: str, what: str, **kwargs: Any) -> Any:
    """`loader.from_pretrained(source)` with a one-line error naming the source; callers ask for safetensors."""
    quiet_transformers()
    try:
        return loader.from_pretrained(str(source), **kwargs)
    except (OSError, ValueError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise DataError(
            f"{source}: cannot load the {what} (expected a local model folder or a Hugging Face hub id with "
            f"safetensors weights): {first}"
        ) from None


def batched(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    """Consecutive slices of at most `size` items."""
    for i in range(0, len(items), size):
        yield items[i : i + size]


def budget_given(given: int) -> int:
    """A `max_batch_tokens` parameter as an int; DataError when it is negative."""
    if int(given) < 0:
        raise DataError(f"max_batch_tokens must be 0 (the device's default) or positive, got {given}")
    return int(given)


def batch_tokens(given: int, device_name: str) -> int:
    """A batch's token budget: `given`, or when it is 0 the default for the device (small on a CPU)."""
    if given:
        return given
    return CPU_BATCH_TOKENS if pick_device(device_name).type == "cpu" else ACCELERATOR_BATCH_TOKENS


def token_batches(lengths: Sequence[int], max_tokens: int) -> list[list[int]]:
    """Indices of `lengths` in length order, grouped so that a batch's padded size (its rows times its longest
    row) stays within `max_tokens`; an input longer than the budget alone makes a batch of one."""
    batches: list[list[int]] = []
    current: list[int] = []
    for i in sorted(range(len(lengths)), key=lengths.__getitem__):
        # Shortest first, so the row being added is the batch's longest.
        if current and (len(current) + 1) * lengths[i] > max_tokens:
            batches.append(current)
            current = []
        current.append(i)
    return batches + [current] if current else batches


def in_token_batches(lengths: Sequence[int], max_tokens: int, run: Callable[[list[int]], Iterable[R]]) -> list[R]:
    """`run` on each of `token_batches(lengths, max_tokens)` (it returns one result per index it is given), the
    results put back in the order of `lengths`."""
    out: list[Any] = [None] * len(lengths)
    for batch in token_batches(lengths, max_tokens):
        for i, result in zip(batch, run(batch), strict=True):
            out[i] = result
    return out


BANDED = "sdpa_banded"
"""The attention implementation `banded_attention` is registered under, in transformers' attention interface."""
BAND_BLOCK = 256
"""Queries a sliding-window layer's attention takes at once."""


def banded_attention(
    module: Any, query: Any, key: Any, value: Any, attention_mask: Any, sliding_window: int | None = None, **kwargs: Any
) -> tuple[Any, None]:
    """transformers' SDPA attention, with a sliding-window layer's run block by block over only the keys a block
    of queries can reach (`sliding_window` positions either side, the layer's mask sliced to match).

    The result is SDPA's over the whole masked sequence (the keys left out are masked there): ModernBERT's sdpa
    attends every query to every key and masks all but 129 of them, so at 4,096 tokens two thirds of its layers did
    about 16 times the attention work they need. Full-attention layers, and inputs too short to gain, run as they are.
    """
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    n = query.shape[2]
    whole = attention_mask is None or attention_mask.shape[-2:] != (n, n)
    if sliding_window is None or whole or n <= BAND_BLOCK + 2 * sliding_window:
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
    parts = []
    for lo in range(0, n, BAND_BLOCK):
        hi = min(n, lo + BAND_BLOCK)
        k_lo, k_hi = max(0, lo - sliding_window), min(n, hi + sliding_window)
        mask = attention_mask[..., lo:hi, k_lo:k_hi]
        q, k, v = query[:, :, lo:hi], key[:, :, k_lo:k_hi], value[:, :, k_lo:k_hi]
        parts.append(sdpa_attention_forward(module, q, k, v, mask, **kwargs)[0])
    return torch.cat(parts, dim=1), None


def attention_for(config: Any, device: Any) -> dict[str, Any]:
    """`from_pretrained` arguments choosing the attention: `banded_attention` for a model with sliding-window layers
    (ModernBERT) on a CPU, else the model's default."""
    if getattr(config, "model_type", "") != "modernbert" or device.type != "cpu":
        return {}
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    # Registration is transformers' own hook for attention functions; the masks are SDPA's.
    AttentionInterface.register(BANDED, banded_attention)
    AttentionMaskInterface.register(BANDED, sdpa_mask)
    return {"attn_implementation": BANDED}


@dataclass(frozen=True)
class PairTemplate:
    """Where a tokenizer puts its special tokens around a pair of sequences, read off one probe encoding.

    transformers 5 dropped `build_inputs_with_special_tokens`; building pairs from ids ourselves lets a window
    hold exactly the tokens we choose (a context slice and an answer slice) without re-tokenising text.
    """

    prefix: tuple[int, ...]
    middle: tuple[int, ...]
    suffix: tuple[int, ...]
    type_a: int | None
    type_b: int | None

    @classmethod
    def of(cls, tokenizer: Any) -> PairTemplate:
        """The template of a fast tokenizer."""
        enc = tokenizer("first", "second")
        seq = enc.sequence_ids()
        ids = enc["input_ids"]
        a = [i for i, s in enumerate(seq) if s == 0]
        b = [i for i, s in enumerate(seq) if s == 1]
        types = enc.get("token_type_ids")
        return cls(
            prefix=tuple(ids[: a[0]]),
            middle=tuple(ids[a[-1] + 1 : b[0]]),
            suffix=tuple(ids[b[-1] + 1 :]),
            type_a=types[a[0]] if types is not None else None,
            type_b=types[b[0]] if types is not None else None,
        )

    @property
    def n_special(self) -> int:
        """Special tokens added around a pair."""
        return len(self.prefix) + len(self.middle) + len(self.suffix)

    def build(self, first: Sequence[int], second: Sequence[int]) -> tuple[list[int], list[int] | None, int]:
        """Input ids, token type ids (None when the model has none) and the position of `second`'s first token."""
        head = [*self.prefix, *first, *self.middle]
        ids = [*head, *second, *self.suffix]
        if self.type_a is None or self.type_b is None:
            return ids, None, len(head)
        types = [self.type_a] * len(head) + [self.type_b] * (len(second) + len(self.suffix))
        return ids, types, len(head)


def encoded_rows(encoding: Any) -> list[tuple[list[int], list[int] | None]]:
    """`(input_ids, token_type_ids or None)` of each text of an unpadded tokenizer output, as `pad_batch` takes."""
    types = encoding.get("token_type_ids")
    return [(ids, types[i] if types is not None else None) for i, ids in enumerate(encoding["input_ids"])]


def pad_batch(rows: Sequence[tuple[list[int], list[int] | None]], pad_id: int, device: Any) -> dict[str, Any]:
    """Right-padded `input_ids`, `attention_mask` (and `token_type_ids` when present) tensors on `device`."""
    import torch

    width = max(len(ids) for ids, _ in rows)
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    has_types = rows[0][1] is not None
    types = torch.zeros((len(rows), width), dtype=torch.long) if has_types else None
    for r, (ids, tt) in enumerate(rows):
        input_ids[r, : len(ids)] = torch.tensor(ids, dtype=torch.long)
        mask[r, : len(ids)] = 1
        if types is not None:
            types[r, : len(ids)] = torch.tensor(tt, dtype=torch.long)
    out = {"input_ids": input_ids.to(device), "attention_mask": mask.to(device)}
    if types is not None:
        out["token_type_ids"] = types.to(device)
    return out


def window_bounds(n: int, size: int, overlap: int) -> list[tuple[int, int]]:
    """`[lo, hi)` windows of at most `size` items covering `0..n`, consecutive ones sharing `overlap` items."""
    if n <= size:
        return [(0, n)]
    step = max(1, size - overlap)
    starts = list(range(0, n - size, step)) + [n - size]
    return [(lo, lo + size) for lo in starts]
