"""Prices per million tokens (`pricing.yaml`, overridable by the user) and the cost of a request's tokens."""

from __future__ import annotations

import os
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from platformdirs import user_config_dir
from pydantic import Field, ValidationError

from shambench.errors import (
    DataError,
)
from shambench.schema import Model
from shambench.structured import yaml_file, yaml_value

PRICING_ENV = "SHAMBENCH_PRICING"


# What the Batch API charges relative to standard processing, for models whose price lists no batch prices
# (OpenAI bills batch requests at half price).
BATCH_DISCOUNT = 0.5


class Price(Model):
    """US dollars per million tokens."""

    input: float = Field(ge=0)
    """Per million prompt tokens."""
    output: float = Field(ge=0)
    """Per million completion tokens (reasoning included)."""
    batch_input: float | None = Field(default=None, ge=0)
    """Per million prompt tokens sent through the Batch API; None means `input * BATCH_DISCOUNT`."""
    batch_output: float | None = Field(default=None, ge=0)
    """Per million completion tokens through the Batch API; None means `output * BATCH_DISCOUNT`."""

    def per_token(self, batch: bool = False) -> tuple[float, float]:
        """(input, output) US dollars per million tokens, at batch prices when `batch`."""
        if not batch:
            return self.input, self.output
        inp = self.input * BATCH_DISCOUNT if self.batch_input is None else self.batch_input
        out = self.output * BATCH_DISCOUNT if self.batch_output is None else self.batch_output
        return inp, out


def pricing_override_path() -> Path:
    """The user's price file: `$SHAMBENCH_PRICING`, else `pricing.yaml` in the user config directory."""
    return Path(os.environ.get(PRICING_ENV) or Path(user_config_dir("shambench")) / "pricing.yaml").expanduser()


PRICES_EXPECTED = "a mapping of model name to {input, output} prices"


def _read_prices(data: Any, origin: str) -> dict[str, Price]:
    data = data or {}
    if not isinstance(data, dict):
        raise DataError(f"{origin}: expected a mapping of model name to {{input, output}} prices")
    try:
        return {str(name): Price.model_validate(entry) for name, entry in data.items()}
    except ValidationError as err:
        raise DataError(f"{origin}: {err.errors()[0]['loc']}: {err.errors()[0]['msg']}") from None


@cache
def load_prices() -> dict[str, Price]:
    """The packaged price table, updated by the user's file when it exists (see `pricing_override_path`)."""
    packaged = resources.files("shambench.llm").joinpath("pricing.yaml").read_text(encoding="utf-8")
    prices = _read_prices(
        yaml_value(packaged, "shambench/llm/pricing.yaml", PRICES_EXPECTED), "shambench/llm/pricing.yaml"
    )
    user = pricing_override_path()
    if user.is_file():
        prices.update(_read_prices(yaml_file(user, PRICES_EXPECTED, named=True), str(user)))
    return prices


def price_of(model: str, prices: dict[str, Price] | None = None) -> Price | None:
    """The price of a model: its exact name, else without a `provider/` prefix, else the longest listed prefix
    (so a dated snapshot such as `gpt-5-mini-2025-08-07` is priced as `gpt-5-mini`); `prices`: the price table
    (default `load_prices()`)."""
    if prices is not None:
        return _listed_price(model, prices)
    global _priced
    table = load_prices()
    priced_from, found = _priced
    if priced_from is not table:
        found = {}
        _priced = (table, found)
    if model not in found:
        found[model] = _listed_price(model, table)
    return found[model]


# Each model's price in the table `load_prices` returned, and that table: every request's cost asks for the
# same model's price, and a model the table does not name is looked for as a prefix of every name in it.
_priced: tuple[dict[str, Price] | None, dict[str, Price | None]] = (None, {})


def _listed_price(model: str, prices: dict[str, Price]) -> Price | None:
    """`price_of` in the table `prices`."""
    for name in (model, model.rsplit("/", 1)[-1]):
        if name in prices:
            return prices[name]
    prefixes = [p for p in prices if model.rsplit("/", 1)[-1].startswith(p)]
    return prices[max(prefixes, key=len)] if prefixes else None


def cost_of(model: str, input_tokens: float, output_tokens: float, batch: bool = False) -> float:
    """US dollars for the tokens (at Batch API prices when `batch`), 0 when the model has no price."""
    price = price_of(model)
    if price is None:
        return 0.0
    inp, out = price.per_token(batch)
    return (input_tokens * inp + output_tokens * out) / 1_000_000
