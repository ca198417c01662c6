"""Optimising a prompted detector's prompt with DSPy's MIPROv2 (`shambench optimize`).

MIPROv2 bootstraps demos, proposes instructions and searches their combinations, scoring each candidate by the
SHAM-Bench per-example token F1 (the scorer's own, on the returned strings placed by `shambench.detection.locate`). Every
model call DSPy makes goes through shambench's client (`shambench.llm.client`): the base preset's endpoint and generation
parameters, its retries, the response cache (an interrupted optimisation re-run with the same seed replays from
it) and its price table, so calls, tokens and cost are counted exactly. DSPy's own sampling settings (the
temperature it asks for when proposing) are not forwarded: reasoning models accept none, and the preset decides.

A reply DSPy cannot parse (its JSON adapter raises) is a failed trial, demo or instruction proposal, never a crash:
it is removed from the response cache (so a re-run asks again rather than replaying it), counted in the program's
`usage.unparsed`, and a failed proposal leaves that candidate with the predictor's current instructions.

Over-adaptation guard: the program is scored, before and after optimisation, on its training examples and on
held-out examples MIPROv2 never sees (by default the test split of the same datasets, 5 per partition, when the
trainset comes from the adapters; a share of the trainset when it is a file). Both scores are printed and saved.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, redirect_stdout
from hashlib import sha256
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from shambench.detection.detector import Monitor, optimizer
from shambench.detectors.miprov2 import (
    OptimisationUsage,
    ProgramFile,
    Prompt,
    Scores,
    base_prompt,
    dspy_version,
    gold_strings,
    import_dspy,
    inputs_of,
    preset_program_path,
    program_detector,
    prompt_of,
    span_program,
)
from shambench.errors import DataError, EndpointStopped
from shambench.extras import import_extra
from shambench.io import write_json
from shambench.llm.loop import LoopThread
from shambench.llm.wire import Usage
from shambench.provenance import now_iso, shambench_version
from shambench.records import read_examples
from shambench.runs.failures import FIRST_REASONS
from shambench.schema import Example, Model, Name, Prediction
from shambench.scoring.scorer import Scorer

if TYPE_CHECKING:
    from rich.console import Console

DEFAULT_HELDOUT_SHARE = 0.2
# Errors MIPROv2's evaluations tolerate before stopping: in effect none stops it (see `strict_adapter`).
MAX_ERRORS = 1_000_000


def default_out(base: str) -> Path:
    """Where a program optimised from preset `base` is saved when no --out is given (the preset's own path, which
    the `<base>-miprov2` detector loads)."""
    return preset_program_path(base)


class OptimizeConfig(Model):
    """Everything that defines an optimisation run."""

    base: str
    """Prompted preset to start from (endpoint, model and generation parameters)."""
    out: str
    """Program file to write."""
    trainset: str = "dev"
    """`dev` (5 per task/dataset), another split name, or an EXAMPLES JSONL file."""
    heldout: str | None = None
    """A split name, a JSONL file, or a share of the trainset such as `0.2`; None: `test` for adapter
    trainsets, `0.2` for a file."""
    heldout_limit: int = Field(default=5, ge=1)
    """Held-out examples per task/dataset partition when they come from a split."""
    datasets: list[Name] | None = None
    """Adapters for split trainsets and held-out sets (None: every available SHAM-Bench source)."""
    data_dir: str | None = None
    """Data directory the adapters read."""
    auto: Literal["light", "medium", "heavy"] = "light"
    """MIPROv2 budget."""
    seed: int = 0
    """Seed of MIPROv2 and of the held-out draw."""
    max_demos: int = Field(default=4, ge=0)
    """Largest number of bootstrapped and of labelled demos per candidate (0: instructions only, the base
    program's worked examples kept)."""
    threads: int | None = Field(default=None, ge=1)
    """Examples MIPROv2 evaluates at once (default: the endpoint's concurrency)."""
    verbose: bool = False
    """Show DSPy's own per-trial log and progress bars."""
    endpoint: dict[str, Any] = Field(default_factory=dict)
    """Overrides of the base preset: model, base_url, api_key_env, max_concurrency, timeout."""
    params: dict[str, Any] = Field(default_factory=dict)
    """Generation-parameter overrides (`-p KEY=VALUE`), as for the prompted detectors."""


def _is_file_spec(spec: str) -> bool:
    return spec.endswith((".jsonl", ".json")) or Path(spec).is_file()


def _share(spec: str) -> float | None:
    try:
        value = float(spec)
    except ValueError:
        return None
    if not 0 < value < 1:
        raise DataError(f"--heldout {spec}: a share of the trainset must be between 0 and 1")
    return value


def examples_from(spec: str, what: str, datasets: list[str] | None, data_dir: str | None) -> list[Example]:
    """The examples of a file or of a split of the adapters; DataError when there are none."""
    if _is_file_spec(spec):
        examples = read_examples(spec)
        if not examples:
            raise DataError(f"{spec}: the {what} file holds no examples")
        return examples
    from shambench.data.benchmark import load_benchmark

    bench = load_benchmark(datasets, spec, data_dir)
    if not bench.examples:
        problems = "; ".join(f"{name}: {message}" for name, message in bench.errors.items())
        raise DataError(f"the {what} ({spec}) is empty" + (f" ({problems})" if problems else " (check --data-dir)"))
    return bench.examples


def _rank(seed: int, example_id: str) -> str:
    return sha256(f"{seed}:{example_id}".encode()).hexdigest()


def split_share(examples: Sequence[Example], share: float, seed: int) -> tuple[list[Example], list[Example]]:
    """Training and held-out examples: `share` of each task/dataset partition held out (seeded, at least one)."""
    groups: dict[str, list[Example]] = defaultdict(list)
    for ex in examples:
        groups[ex.partition].append(ex)
    held: set[str] = set()
    for members in groups.values():
        ranked = sorted(members, key=lambda ex: _rank(seed, ex.id))
        held.update(ex.id for ex in ranked[: round(share * len(members))])
    if not held:
        held.add(min(examples, key=lambda ex: _rank(seed, ex.id)).id)
    return [ex for ex in examples if ex.id not in held], [ex for ex in examples if ex.id in held]


def train_and_heldout(config: OptimizeConfig) -> tuple[list[Example], list[Example], str]:
    """The training examples, the held-out examples and a description of the held-out selection."""
    from shambench.runs.selection import first_per_partition

    examples = examples_from(config.trainset, "trainset", config.datasets, config.data_dir)
    spec = config.heldout or (str(DEFAULT_HELDOUT_SHARE) if _is_file_spec(config.trainset) else "test")
    share = _share(spec)
    if share is not None:
        train, held = split_share(examples, share, config.seed)
        described = f"{share:g} of the trainset per partition, seed {config.seed}"
    else:
        train = examples
        seen = {ex.id for ex in train}
        fresh = [
            ex for ex in examples_from(spec, "held-out set", config.datasets, config.data_dir) if ex.id not in seen
        ]
        held = fresh if _is_file_spec(spec) else list(first_per_partition(fresh, config.heldout_limit))
        described = spec if _is_file_spec(spec) else f"{spec}, first {config.heldout_limit} per partition"
        if not held:
            raise DataError(f"the held-out set ({spec}) has no example outside the trainset")
    if len(train) < 2:
        raise DataError(f"MIPROv2 needs at least 2 training examples; the trainset leaves {len(train)}")
    return train, held, described


class TokenF1:
    """The MIPROv2 metric: SHAM-Bench token F1 of one example, after placing the returned strings."""

    def __init__(self, examples: Sequence[Example], monitor: Monitor):
        self.scorer = Scorer(examples, n_resamples=10)
        self.examples = {ex.id: ex for ex in examples}
        self.monitor = monitor

    def __call__(self, gold: Any, pred: Any, trace: Any = None) -> float:
        from shambench.detection.locate import locate

        example = self.examples[gold.id]
        strings = [str(s) for s in (getattr(pred, "incorrect_spans", None) or [])]
        spans = [p.as_span() for p in locate(example.response, strings) if p.placed]
        self.monitor.count("evaluations")
        return float(
            self.scorer.example_prf([Prediction(id=example.id, spans=spans)])["token"][2][self.scorer.index[example.id]]
        )


def mean_token_f1(examples: Sequence[Example], predictions: Sequence[Prediction]) -> float:
    """Per-example token F1 averaged over the examples (failed predictions count as empty)."""
    return float(Scorer(examples, n_resamples=10).example_prf(predictions)["token"][2].mean())


class ClientEngine:
    """A DSPy LM engine that sends DSPy's requests through a shambench `LLMClient`.

    The client lives on one event loop in a daemon thread; DSPy's worker threads submit to it, so the client's
    concurrency bound, retries and cache apply to all of them.
    """

    def __init__(self, client: Any, body: dict[str, Any], monitor: Monitor):
        self.client = client
        self.body = body
        self.monitor = monitor
        self.usage = OptimisationUsage()
        self._lock = threading.Lock()
        self._last = threading.local()
        self._loop = LoopThread("shambench-dspy")

    def complete(self, request: Any) -> Any:
        from dspy.lm15 import Message, Response, TextPart
        from dspy.lm15 import Usage as LMUsage

        from shambench.llm.client import LLMError

        messages = [{"role": "system", "content": _text(request.system)}] if request.system is not None else []
        messages += [{"role": m.role, "content": m.text or ""} for m in request.messages]
        self.monitor.count("lm_calls")
        future = self._loop.submit(self.client.chat(messages, self.body))
        try:
            done = future.result()
        except LLMError as err:
            self._add(err.usage, failure=err.reason)
            raise
        self._add(done.usage)
        self._last.key = done.key
        u = done.usage
        return Response(
            id=None,
            model=self.client.endpoint.model,
            message=Message.assistant([TextPart(done.text)]),
            finish_reason="length" if done.finish_reason == "length" else "stop",
            usage=LMUsage(
                input_tokens=u.input_tokens,
                output_tokens=u.output_tokens,
                total_tokens=u.input_tokens + u.output_tokens,
            ),
        )

    def _add(self, usage: Usage, failure: str | None = None) -> None:
        with self._lock:
            self.usage = add_usage(self.usage, usage, failures=[failure] if failure else [])

    def reject_last(self) -> None:
        """Count the reply this thread received last as unparsable and take it out of the response cache."""
        key = getattr(self._last, "key", None)
        if key is not None and self.client.cache is not None:
            self.client.cache.discard(key)
        self.count("unparsed")

    def count(self, field: str) -> None:
        """Add one to a `Usage` counter (and the monitor's)."""
        self.monitor.count(field)
        with self._lock:
            self.usage = self.usage.model_copy(update={field: getattr(self.usage, field) + 1})

    def stream(self, request: Any) -> Any:
        from dspy.lm15 import response_to_events

        return response_to_events(self.complete(request))

    def close(self) -> None:
        """Close the client's connections and stop the loop."""
        self._loop.close(self.client.aclose())


def _text(system: Any) -> str:
    return system if isinstance(system, str) else "".join(getattr(p, "text", "") for p in system)


def add_usage(total: OptimisationUsage, usage: Usage, failures: Sequence[str] = ()) -> OptimisationUsage:
    """`total` with one more call added, which consumed `usage` (`failures`: its reason when it failed)."""
    added = total.plus(usage)
    return added.model_copy(
        update=dict(
            lm_calls=total.lm_calls + 1,
            failed_calls=total.failed_calls + len(failures),
            failures=[*total.failures, *failures][:FIRST_REASONS],
        )
    )


# The fields of the signature DSPy's instruction proposer predicts (`GenerateSingleModuleInstruction` in
# dspy.propose.grounded_proposer): the instruction it proposes, and the predictor's current one it starts from.
PROPOSED, CURRENT = "proposed_instruction", "basic_instruction"


def is_proposal(signature: Any) -> bool:
    """Whether a DSPy signature is the instruction proposer's."""
    return list(signature.output_fields) == [PROPOSED] and CURRENT in signature.input_fields


def strict_adapter(engine: ClientEngine) -> Any:
    """DSPy's JSON adapter, which also uncaches and counts each reply it cannot parse. A trial or demo then fails
    as before (the parse error is raised, and DSPy records it); an instruction proposal instead yields the
    predictor's current instructions as that candidate, counted in `failed_proposals`, because DSPy's proposer
    catches nothing and a raised error would end MIPROv2."""
    dspy = import_dspy()
    from dspy.utils.exceptions import AdapterParseError

    # Why here: the adapter is DSPy's extension point for how replies become outputs, it is already scoped to
    # this compile by `dspy.context`, and it sees the proposal's inputs, hence the current instructions. The
    # alternative, a MIPROv2 subclass handing a GroundedProposer subclass over, must override the private
    # `_propose_instructions` with a copy of its body; this depends only on the two field names above.
    class StrictJSONAdapter(dspy.JSONAdapter):  # type: ignore[name-defined]  # dspy comes from import_dspy() at run time
        def __call__(
            self, lm: Any, lm_kwargs: dict[str, Any], signature: Any, demos: list[Any], inputs: dict[str, Any]
        ) -> list[dict[str, Any]]:
            try:
                return super().__call__(lm, lm_kwargs, signature, demos, inputs)
            except AdapterParseError:
                if not is_proposal(signature):
                    raise
                engine.count("failed_proposals")  # `parse` has already counted and uncached the reply
                return [{PROPOSED: inputs[CURRENT]}]

        def parse(self, signature: Any, completion: str) -> dict[str, Any]:
            try:
                return super().parse(signature, completion)
            except AdapterParseError:
                engine.reject_last()
                raise
            except RecursionError:
                # JSON nested past Python's recursion limit (a hostile or broken server): unparsable like the rest.
                engine.reject_last()
                raise AdapterParseError("JSONAdapter", signature, completion[:200], "JSON nested too deep") from None

    return StrictJSONAdapter()


@contextmanager
def quiet(enabled: bool) -> Iterator[None]:
    """Silence DSPy's and Optuna's per-trial log and DSPy's progress bars (shambench shows its own display)."""
    if not enabled:
        yield
        return
    loggers = [logging.getLogger(name) for name in ("dspy", "optuna")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.WARNING)
    # MIPROv2 always asks for DSPy's tqdm bars, which write to sys.stdout (a rich console meant to stay visible
    # must hold the real stdout, as `shambench optimize` makes its console do).
    try:
        with open(os.devnull, "w") as sink, redirect_stdout(sink):
            yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def dspy_examples(examples: Sequence[Example]) -> list[Any]:
    """The examples as DSPy examples: the program's inputs, the gold strings as its output, and the id."""
    dspy = import_dspy()
    return [
        dspy.Example(id=ex.id, **inputs_of(ex), incorrect_spans=gold_strings(ex)).with_inputs(*inputs_of(ex))
        for ex in examples
    ]


def compile_prompt(config: OptimizeConfig, train: Sequence[Example], engine: ClientEngine, monitor: Monitor) -> Prompt:
    """MIPROv2's optimised instructions and demos for the training examples."""
    dspy = import_dspy()
    lm = dspy.LM(f"openai/{engine.client.endpoint.model}", engine=engine, cache=False, num_retries=0)
    optimizer = dspy.MIPROv2(
        metric=TokenF1(train, monitor),
        prompt_model=lm,
        task_model=lm,
        auto=config.auto,
        max_bootstrapped_demos=config.max_demos,
        max_labeled_demos=config.max_demos,
        num_threads=config.threads or engine.client.endpoint.max_concurrency,
        seed=config.seed,
        # Unparsable replies are failed trials (scored 0), however many: the run goes on and reports them.
        max_errors=MAX_ERRORS,
    )
    with dspy.context(lm=lm, adapter=strict_adapter(engine)), quiet(not config.verbose):
        try:
            compiled = optimizer.compile(span_program(base_prompt()), trainset=dspy_examples(train), seed=config.seed)
        except dspy.LMError as err:
            # A call MIPROv2 cannot go on without (an instruction proposal, the data summary) failed for good; DSPy
            # raises its own error from the client's, which says what went wrong in one line.
            cause = err.__cause__
            if isinstance(cause, EndpointStopped):
                raise cause from None
            raise EndpointStopped(f"MIPROv2 stopped: a call it needs failed for good: {cause or err}") from None
    return prompt_of(compiled)


def score_prompts(
    detectors: Sequence[Any], examples: Sequence[Example], monitor: Monitor, usage: OptimisationUsage
) -> tuple[list[float], OptimisationUsage]:
    """Mean token F1 of each detector on the examples, and `usage` with what the evaluations consumed."""
    scores = []
    for detector in detectors:
        predictions = list(detector.predict(examples, monitor))
        scores.append(mean_token_f1(examples, predictions))
        for p in predictions:
            spent = Usage.model_validate(p.meta.get("usage") or {})
            usage = add_usage(usage, spent, failures=[p.error] if p.error else [])
    return scores, usage


def optimize(config: OptimizeConfig, monitor: Monitor | None = None) -> ProgramFile:
    """Run MIPROv2 from the base preset, score before and after on training and held-out examples, save."""
    from shambench.llm.cache import ResponseCache
    from shambench.llm.client import LLMClient

    monitor = monitor or Monitor()
    train, held, held_described = train_and_heldout(config)
    base = program_detector(base_prompt(), config.base, **config.endpoint, **config.params)
    cache = ResponseCache()
    client = LLMClient(base.endpoint, cache=cache, on_count=monitor.count, seed=config.seed)
    client.endpoint.api_key()  # a missing key is one clear error before any work starts
    engine = ClientEngine(client, base.body(), monitor)
    try:
        prompt = compile_prompt(config, train, engine, monitor)
    finally:
        engine.close()
        cache.close()
    optimized = program_detector(prompt, config.base, **config.endpoint, **config.params)
    (train_base, train_opt), usage = score_prompts([base, optimized], train, monitor, engine.usage)
    (held_base, held_opt), usage = score_prompts([base, optimized], held, monitor, usage)
    program = ProgramFile(
        dspy_version=dspy_version(),
        shambench_version=shambench_version(),
        created_at=now_iso(),
        base=config.base,
        model=base.endpoint.model,
        base_url=base.endpoint.base_url,
        api_key_env=base.endpoint.api_key_env,
        generation=base.generation,
        instructions=prompt.instructions,
        demos=prompt.demos,
        auto=config.auto,
        seed=config.seed,
        max_demos=config.max_demos,
        trainset=config.trainset,
        trainset_ids=[ex.id for ex in train],
        heldout=held_described,
        heldout_ids=[ex.id for ex in held],
        train=Scores(n=len(train), base=train_base, optimized=train_opt),
        heldout_scores=Scores(n=len(held), base=held_base, optimized=held_opt),
        usage=usage,
    )
    write_json(config.out, program)
    return program


def overfit_gap(program: ProgramFile) -> float:
    """How much more the optimisation gained on its training examples than on held-out ones (F1 points)."""
    train_gain = program.train.optimized - program.train.base
    held_gain = program.heldout_scores.optimized - program.heldout_scores.base
    return train_gain - held_gain


def print_summary(program: ProgramFile, out: str, console: Console) -> None:
    """Print the scores before and after on training and held-out examples, usage, and where the program went."""
    from rich.table import Table

    from shambench.reporting.console import warn

    table = Table(title=f"token F1 (per-example mean), {program.base} with MIPROv2 {program.auto}, seed {program.seed}")
    for column in ("examples", "n", "base", "optimised", "change"):
        table.add_column(column, justify="left" if column == "examples" else "right")
    for name, scores in (("training", program.train), ("held-out", program.heldout_scores)):
        change = scores.optimized - scores.base
        table.add_row(name, str(scores.n), f"{scores.base:.3f}", f"{scores.optimized:.3f}", f"{change:+.3f}")
    console.print(table)
    gap = overfit_gap(program)
    if gap > 0.05:
        warn(
            console,
            f"the training gain exceeds the held-out gain by {gap:.3f}: the prompt may be adapted to its training "
            "examples",
        )
    u = program.usage
    console.print(
        f"LM calls: {u.lm_calls} ({u.requests} requests, {u.cache_hit} cache hits); tokens: {u.input_tokens} in, "
        f"{u.output_tokens} out; cost: ${u.cost:.4f}"
    )
    if u.unparsed:
        warn(
            console,
            f"{u.unparsed} model replies could not be parsed ({u.failed_proposals} of them instruction "
            "proposals): counted as failed trials, not cached, asked again on a re-run",
        )
    console.print(f"held-out: {program.heldout}; DSPy {program.dspy_version}")
    console.print(f"program: {out}  (evaluate: shambench eval --detector miprov2:{out})")


@optimizer("miprov2")
def miprov2_optimizer() -> ModuleType:
    """DSPy MIPROv2 optimisation of a prompted preset's prompt (`shambench optimize`)."""
    # MIPROv2 searches with optuna, which the base install leaves out: said before anything is read or shown
    import_extra("optuna", "optimize", "shambench optimize (DSPy's MIPROv2)")
    return sys.modules[__name__]
