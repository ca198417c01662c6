"""The helpers the model-backed detectors share: token-budget batches, and outputs that do not depend on them."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shambench.detectors._models import (
    CPU_BATCH_TOKENS,
    batch_tokens,
    budget_given,
    in_token_batches,
    token_batches,
)
from shambench.errors import DataError
from shambench.schema import Example
from tests.detectors.tiny_models import require_models, save_tiny


def test_token_batches_by_hand():
    # Length order: 1 (index 1), 3 (2), 3 (3), 5 (0), 9 (4). [1, 3] pads to 2 x 3 = 6; a third row of 3 would make
    # 9 > 6; 3 and 5 would make 10; 9 alone is over the budget and makes a batch of its own.
    assert token_batches([5, 1, 3, 3, 9], 6) == [[1, 2], [3], [0], [4]]
    assert token_batches([], 6) == []
    assert token_batches([4, 4, 4], 12) == [[0, 1, 2]]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 60), max_size=40), st.integers(1, 200))
def test_token_batches_keep_every_input_once_within_budget_in_length_order(lengths, budget):
    batches = token_batches(lengths, budget)
    flat = [i for batch in batches for i in batch]
    assert sorted(flat) == list(range(len(lengths)))  # every input exactly once
    assert [lengths[i] for i in flat] == sorted(lengths)  # shortest first
    for k, batch in enumerate(batches):
        assert batch
        # Under the budget, unless a single input exceeds it alone.
        assert len(batch) * max(lengths[i] for i in batch) <= budget or len(batch) == 1
        if k + 1 < len(batches):  # grouped greedily: the next input would not have fitted
            assert (len(batch) + 1) * lengths[batches[k + 1][0]] > budget


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 60), max_size=40), st.integers(1, 200))
def test_in_token_batches_returns_results_in_the_original_order(lengths, budget):
    seen: list[list[int]] = []

    def run(batch: list[int]) -> list[tuple[int, int]]:
        seen.append(batch)
        return [(i, lengths[i]) for i in batch]

    assert in_token_batches(lengths, budget, run) == [(i, n) for i, n in enumerate(lengths)]
    assert seen == token_batches(lengths, budget)


def test_a_run_giving_too_few_results_is_an_error():
    with pytest.raises(ValueError):
        in_token_batches([1, 2], 10, lambda batch: [0])


def test_the_budget_is_given_or_the_devices():
    assert batch_tokens(123, "cpu") == 123
    require_models()
    assert batch_tokens(0, "cpu") == CPU_BATCH_TOKENS
    assert budget_given(0) == 0 and budget_given(7) == 7
    with pytest.raises(DataError, match="max_batch_tokens must be 0"):
        budget_given(-1)


EXAMPLES = [
    Example(
        id=f"e{i}",
        dataset="d",
        task="t",
        question="Who won the race?" if i % 2 else "",
        context="Ann won the race in May. " * (3 + 9 * i) + "Bob was second.",
        response=" ".join(["Ann won the race.", "Bob came second in June.", "It rained."][: 1 + i % 3]) * (1 + i % 2),
    )
    for i in range(6)
]


def token_classifier(root):
    from shambench.detection.detector import create_detector

    folder = save_tiny(
        root, "AutoModelForTokenClassification", seed=3, head_scale=40.0, attention_scale=30.0, num_labels=2
    )
    return lambda budget: create_detector(f"lettucedetect:{folder}", max_length=96, max_batch_tokens=budget)


def minicheck(root):
    from shambench.detection.detector import create_detector

    folder = save_tiny(root, "AutoModelForSequenceClassification", kind="bert", seed=3, head_scale=40.0, num_labels=2)
    return lambda budget: create_detector(
        f"minicheck:{folder}", max_length=64, chunk_size=30, max_batch_tokens=budget, device="cpu"
    )


def embedding_support(root):
    from shambench.detection.detector import create_detector

    return lambda budget: create_detector("embedding-support", max_batch_tokens=budget, device="cpu")


def prm(root):
    import torch
    import transformers

    from shambench.detection.detector import create_detector
    from tests.detectors.test_math import WORDS, _word_tokenizer

    _, size = _word_tokenizer(root, WORDS + ["Question", ":", "Solution"], ["<extra_0>"])
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=size, hidden_size=8, num_hidden_layers=1, num_attention_heads=1, intermediate_size=8, num_labels=2
    )
    transformers.BertForTokenClassification(config).eval().save_pretrained(root)
    return lambda budget: create_detector(
        f"prm:{root}", backend="transformers", format="sharp", max_batch_tokens=budget
    )


def prm_examples() -> list[Example]:
    from tests.detectors.test_math import example

    return [example(labels, f"s{i}") for i, labels in enumerate([(1, 0, 0), (1,), (0, 1, 1, 1, 0), (1, 1)])]


@pytest.mark.parametrize("build", [token_classifier, minicheck, embedding_support, prm])
def test_outputs_are_the_same_at_every_batch_budget(build, tmp_path):
    """Each input alone (a budget of 1), all in one batch, and the device's default: the same spans, scores and
    step scores, to float tolerance; the run's parameters record the budget."""
    require_models()
    make = build(tmp_path)
    examples = prm_examples() if build is prm else EXAMPLES
    runs = {budget: list(make(budget).predict(examples)) for budget in (1, 0, 1_000_000)}
    alone = runs[1]
    assert all(p.error is None for p in alone)
    assert any(p.spans for p in alone) and any(p.scores for p in alone)
    for budget, preds in runs.items():
        for a, b in zip(alone, preds, strict=True):
            assert (a.id, [(s.start, s.end) for s in a.spans]) == (b.id, [(s.start, s.end) for s in b.spans]), budget
            assert [s.score for s in a.scores] == pytest.approx([s.score for s in b.scores], abs=1e-5)
            assert a.sentence_labels == b.sentence_labels
            assert a.step_scores == pytest.approx(b.step_scores, abs=1e-5)
    assert make(77).params()["max_batch_tokens"] == 77
    assert make(0).params()["max_batch_tokens"] == CPU_BATCH_TOKENS


def test_banded_attention_is_sdpa_over_the_whole_masked_sequence():
    """A sliding-window layer's attention by blocks equals SDPA over every key with the window mask, padding
    included; and a ModernBERT loaded with it gives the default's logits on the real tokens of a padded batch."""
    require_models()
    import torch
    import transformers
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from shambench.detectors._models import BANDED, attention_for, banded_attention

    torch.manual_seed(0)
    n, window = 1000, 65
    query, key, value = (torch.randn(2, 2, n, 8) for _ in range(3))
    near = (torch.arange(n)[:, None] - torch.arange(n)[None, :]).abs() <= window - 1
    real = torch.ones(2, n, dtype=torch.bool)
    real[1, 700:] = False
    mask = (near[None] & real[:, None, :])[:, None]
    module = torch.nn.Module()
    module.is_causal = False
    whole, _ = sdpa_attention_forward(module, query, key, value, mask)
    banded, _ = banded_attention(module, query, key, value, mask, sliding_window=window)
    assert banded.shape == whole.shape == (2, n, 2, 8)
    assert torch.allclose(banded[0], whole[0], atol=1e-5) and torch.allclose(banded[1, :700], whole[1, :700], atol=1e-5)

    config = transformers.ModernBertConfig(
        vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=2,
        global_attn_every_n_layers=3, local_attention=128, max_position_embeddings=2048, num_labels=2, pad_token_id=0,
    )  # fmt: skip
    model = transformers.ModernBertForTokenClassification(config).eval()
    with torch.no_grad():
        for name, weight in model.named_parameters():
            if "attn" in name and weight.dim() == 2:
                weight.mul_(30.0)  # so that what a token attends to matters
    fast = transformers.ModernBertForTokenClassification.from_pretrained(
        None, config=config, state_dict=model.state_dict(), **attention_for(config, torch.device("cpu"))
    ).eval()
    assert fast.config._attn_implementation == BANDED
    ids = torch.randint(5, 100, (2, n))
    with torch.inference_mode():
        expected = model(input_ids=ids, attention_mask=real.long()).logits
        got = fast(input_ids=ids, attention_mask=real.long()).logits
    assert torch.allclose(got[real], expected[real], atol=1e-4)
    assert config.layer_types.count("sliding_attention") == 2  # two of the three layers went by blocks
