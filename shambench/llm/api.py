"""The base of API-backed detectors: one request per item through the shared client.

Prompted detectors, the generative taggers, the math critic, Bespoke-MiniCheck and the PRM pooling backend all
ask an OpenAI-compatible server; through this base they share one client with its retries, structured-output
negotiation, served-model check, response cache, token and cost accounting, Batch API route and cost budget. A
subclass says what to ask of one example (`predict_one`); everything about how it is fetched lives here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Iterator, Sequence
from typing import Any, TypeVar

from shambench.detection.detector import Detector, Monitor
from shambench.llm.client import LLMClient, map_endpoint
from shambench.llm.endpoint import Endpoint
from shambench.llm.loop import Feed
from shambench.llm.route import Budget, Route
from shambench.schema import Example, Prediction

T = TypeVar("T")
R = TypeVar("R")


class APIDetector(Detector):
    """A detector whose predictions come from a model behind an OpenAI-compatible API."""

    structured: str = "auto"
    """Structured-output setting of its requests that ask for JSON (`auto` negotiates; see `shambench.llm.client`)."""
    route: Route | None = None
    """Where uncached requests go instead of the HTTP API (the Batch API's route, set by `--batch`); not a
    parameter: it changes how answers are fetched, never what they are."""
    budget: Budget | None = None
    """What stops sending requests (set by `--max-cost`); not a parameter either."""

    def __init__(self, endpoint: Endpoint, use_cache: bool = True):
        self.endpoint = endpoint
        self.use_cache = use_cache

    def params(self) -> dict[str, Any]:
        """The endpoint's identity (model, server, key variable; never the key); subclasses add their own."""
        return self.endpoint.identity()

    def check_can_run(self) -> None:
        """DataError when requests would go to OpenAI without a key (a server of one's own may need none)."""
        self.endpoint.api_key()

    async def predict_one(self, client: LLMClient, example: Example) -> Prediction:
        """The prediction for one example, asked through `client` (a failed request is a failed prediction)."""
        raise NotImplementedError(f"{type(self).__name__} must implement predict_one()")

    def predict(self, examples: Sequence[Example], monitor: Monitor | None = None) -> Iterator[Prediction]:
        yield from self.map(examples, self.predict_one, monitor)

    def predicts_fed(self) -> bool:
        """Whether `predict_fed` predicts what `predict` does: `predict` is this class's own, one request per
        example (a subclass with a `predict` of its own, e.g. a local backend, needs its examples all known)."""
        return type(self).predict is APIDetector.predict

    def predict_fed(self, examples: Feed[Example], monitor: Monitor | None = None) -> Generator[Prediction]:
        """Predictions for the examples of a feed, sent as they are put and yielded as they complete."""
        yield from self.map(examples, self.predict_one, monitor)

    def map(
        self, items: Sequence[T] | Feed[T], work: Callable[[LLMClient, T], Awaitable[R]], monitor: Monitor | None = None
    ) -> Iterator[R]:
        """`work(client, item)` for every item through this detector's endpoint, yielded as they complete."""
        yield from map_endpoint(
            self.endpoint, items, work, monitor, self.use_cache, self.structured, self.route, self.budget
        )
