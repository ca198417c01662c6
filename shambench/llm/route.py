"""Where the requests a response cache cannot answer go, and when they stop being sent: a `Route` in place of the
endpoint's HTTP API (the Batch API's answers), a `Deferred` request held back for a batch, a `Budget` of cost."""

from __future__ import annotations

from typing import Any

from shambench.llm.wire import Reply

NOT_RUN = "not run"
"""How the reason of a request that was never sent begins (budget reached): such examples are run by `--resume`."""


class Budget:
    """A spending limit for one invocation: requests stop being sent once the accounted cost reaches `limit`.
    Requests already in flight finish and are accounted, so the total may pass the limit by what they cost."""

    def __init__(self, limit: float):
        self.limit = limit
        self.spent = 0.0

    def reached(self) -> bool:
        """True once the accounted cost is at or above the limit."""
        return self.spent >= self.limit

    def reason(self) -> str:
        """The failure reason recorded for an example the budget kept from running."""
        return f"{NOT_RUN}: the --max-cost budget of ${self.limit:.4f} was reached (${self.spent:.4f} accounted)"


class Deferred(Exception):
    """A request a route holds back rather than sends (to go into a batch): its item is not answered now."""

    def __init__(self, key: str, kind: str, body: dict[str, Any]):
        super().__init__(key)
        self.key = key
        self.kind = kind
        self.body = body


class Route:
    """Where the requests a cache cannot answer go instead of the endpoint's HTTP API (the Batch API's answers).

    `send` returns the validated reply (`reply_of`), raises LLMError for a request that failed, or Deferred to
    hold the request back; `held` learns which item a held-back request belonged to."""

    async def send(self, key: str, kind: str, body: dict[str, Any]) -> Reply:
        raise NotImplementedError

    def held(self, item: Any, deferred: Deferred) -> None:
        """The request `deferred` was made for `item`, which is left unanswered."""
