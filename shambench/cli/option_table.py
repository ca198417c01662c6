"""The option of each field of `RunSpec`: the fields of its `OptionRow` (`shambench.cli.options`) that are not
at their defaults. What the command line reads to make its run options and their help without importing
pydantic. Written from the fields by `python -m shambench.cli.options`, not by hand (nor by the formatter:
pyproject.toml excludes it); tests/cli/test_options.py checks that it is up to date.
"""

from typing import Any

OPTIONS: dict[str, dict[str, Any]] = {
    'detector': {'flags': ('--detector',), 'metavar': 'NAME', 'help': 'Detector name, or NAME:ARG (see `shambench list detectors`).'},
    'params': {'flags': ('--param', '-p'), 'kind': 'pairs', 'default': (), 'metavar': 'KEY=VALUE', 'help': 'Detector parameter (repeatable).'},
    'model': {'flags': ('--model',), 'help': 'Model name, for API-backed detectors.'},
    'base_url': {'flags': ('--base-url',), 'kind': 'base_url', 'help': "OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 (no user:password@: name the key's variable with --api-key-env)."},
    'api_key_env': {'flags': ('--api-key-env',), 'metavar': 'VAR', 'help': 'Environment variable holding the API key (default OPENAI_API_KEY).'},
    'limit': {'flags': ('--limit',), 'section': 'selection', 'kind': 'int', 'low': 1, 'help': 'Use only the first N examples of each partition.'},
    'split': {'flags': ('--split',), 'section': 'selection', 'default': 'test', 'show_default': True, 'help': 'Split: test, or dev (the validation set).'},
    'data_dir': {'flags': ('--data-dir',), 'section': 'selection', 'kind': 'dir', 'help': 'Folder holding the corpora (default: $SHAMBENCH_DATA_DIR, else the user cache directory).'},
    'datasets': {'flags': ('--datasets', '-d'), 'section': 'selection', 'metavar': 'NAMES', 'help': 'Comma-separated dataset names (see `shambench list datasets`); default: every SHAM-Bench source present.'},
    'examples_file': {'flags': ('--examples',), 'section': 'selection', 'kind': 'file', 'help': 'An EXAMPLES JSONL file instead of --datasets (one unified example per line).'},
    'context': {'flags': ('--context',), 'section': 'selection', 'metavar': 'PROVIDER', 'help': "Evidence for open-domain examples from a context provider, e.g. file:EVIDENCE.jsonl or wikipedia (default: each source's own context, empty for open-domain sets)."},
    'context_params': {'flags': ('--context-param',), 'section': 'selection', 'kind': 'pairs', 'default': (), 'metavar': 'KEY=VALUE', 'help': 'Context provider parameter (repeatable), e.g. preset=qwen3-4b for --context llm.'},
    'suite': {'flags': ('--suite',), 'section': 'selection', 'kind': 'suite', 'help': "Datasets by suite instead of --datasets: a step-level math suite (prints its per-subset table: ProcessBench F1, Hard2Verify balanced accuracy/F1, Math-Shepherd character F1), mushroom (the 14 Mu-SHROOM languages) or extended (every SHAM-Bench source present plus HaluQuestQA, XSumFaith's Gold summaries and the 14 languages; prints the extended view, whose overall never enters the paper's)."},
    'n_resamples': {'flags': ('--bootstrap',), 'section': 'scoring', 'kind': 'int', 'low': 10, 'default': 1000, 'show_default': True, 'help': 'Bootstrap resamples for the 95% confidence intervals.'},
    'seed': {'flags': ('--seed',), 'section': 'scoring', 'kind': 'int', 'default': 0, 'show_default': True, 'help': 'Seed of the bootstrap.'},
    'alt_epsilon': {'flags': ('--alt-epsilon',), 'section': 'scoring', 'kind': 'float', 'low': 0.0, 'default': 0.2, 'show_default': True, 'help': "Epsilon of the alternative annotator test in groups.agreement (H0: mean(W_f - W_h) <= -epsilon); the default is the paper's value for skilled annotators (`shambench.scoring.alternative.ALT_EPSILON`)."},
    'sopo_compat': {'flags': ('--sopo-compat',), 'section': 'scoring', 'kind': 'bool', 'default': False, 'help': "With --suite math-shepherd: also report the SOPO kit's label-dependent span rule (compatibility only)."},
    'run_dir': {'flags': ('--run-dir',), 'section': 'execution', 'kind': 'dir', 'help': 'Run directory to create, new or empty (default: one under --runs), or, with --resume, the one to finish.'},
    'runs_root': {'flags': ('--runs',), 'section': 'execution', 'kind': 'dir', 'default': 'runs', 'show_default': True, 'help': 'Where new run directories go.'},
    'resume': {'flags': ('--resume',), 'section': 'execution', 'kind': 'bool', 'default': False, 'shown': False, 'help': 'Finish the run in --run-dir where it stopped: only missing or failed examples are run.'},
    'new_run': {'flags': ('--new-run',), 'section': 'execution', 'kind': 'bool', 'default': False, 'help': 'Start a new run directory even when --runs holds an unfinished run of the same detector, parameters and selection (by default that run is resumed).'},
    'max_concurrency': {'flags': ('--max-concurrency',), 'section': 'execution', 'kind': 'int', 'low': 1, 'help': 'Requests in flight at once.'},
    'timeout': {'flags': ('--timeout',), 'section': 'execution', 'kind': 'float', 'low': 0.1, 'help': 'Per-request timeout in seconds.'},
    'batch': {'flags': ('--batch',), 'section': 'execution', 'kind': 'bool', 'default': False, 'help': "Send the requests through OpenAI's Batch API (half price, answers within 24 h); prompted detectors only."},
    'wait': {'flags': ('--no-wait',), 'section': 'execution', 'kind': 'bool', 'default': False, 'inverse': True, 'help': 'With --batch: submit the batch and exit with status 4 (submitted, not finished); `shambench eval --resume RUN_DIR` finishes the run later.'},
    'poll': {'flags': ('--poll',), 'section': 'execution', 'kind': 'float', 'low': 0, 'low_open': True, 'default': 5.0, 'show_default': True, 'help': 'With --batch: seconds between the first two status checks (each further wait is 1.5 times longer, at most 5 min).'},
    'batch_timeout': {'flags': ('--batch-timeout',), 'section': 'execution', 'kind': 'duration', 'default': '26h', 'show_default': True, 'metavar': 'DURATION', 'help': 'With --batch: stop waiting for a batch after this long (e.g. 90m, 26h, 3600s); the batch stays recorded, the run is left unfinished and a resume waits again.'},
    'dry_run': {'flags': ('--dry-run',), 'section': 'execution', 'kind': 'bool', 'default': False, 'help': 'Print the requests the run would send (after the cache), their input tokens and estimated cost, with and without the batch discount; send and write nothing.'},
    'max_cost': {'flags': ('--max-cost',), 'section': 'execution', 'kind': 'float', 'low': 0, 'metavar': 'USD', 'help': "Stop sending requests once this invocation's accounted cost reaches USD (by batch: a batch holds only the requests its estimate fits); the rest are recorded as not run (failed predictions), which a resume runs."},
    'fail_fast': {'flags': ('--keep-going',), 'section': 'execution', 'kind': 'bool', 'default': False, 'inverse': True, 'help': 'Do not stop when predictions fail systematically (by default a run stops when its first 8, or 20 in a row, fail for the same reason).'},
}
