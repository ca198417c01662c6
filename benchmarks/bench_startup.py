"""How long the everyday commands take to start, against a plain click CLI of the same size timed in the same run.

    .venv/bin/python benchmarks/bench_startup.py [--repeats 7]

Each command is run as a fresh process (`python -m shambench ...`, as the `shambench` script does) `--repeats`
times, alternating with the reference; the median wall time of each is printed with its ratio to the reference.
The reference is a click group of 13 subcommands that imports nothing else, so the ratio is what shambench's own
imports cost. Targets: `--help` under 0.3 s, and `--help` within 3x the reference.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_HELP_SECONDS = 0.3
TARGET_HELP_RATIO = 3.0
REFERENCE = '''
import click

@click.group()
def main():
    """A reference CLI."""

for i in range(13):
    main.add_command(click.Command(f"cmd{i}", callback=lambda: None, help=f"Command {i}."))

main()
'''
COMMANDS = (["--help"], ["eval", "--help"], ["list", "detectors"], ["list", "datasets"])


def wall(argv: list[str]) -> float:
    """Seconds one process takes from start to exit."""
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ref_script = Path(tmp) / "reference_cli.py"
        ref_script.write_text(REFERENCE, encoding="utf-8")
        reference = [sys.executable, str(ref_script), "--help"]
        runs: dict[str, list[float]] = {"reference": []}
        for _ in range(args.repeats):
            runs["reference"].append(wall(reference))
            for command in COMMANDS:
                runs.setdefault(" ".join(command), []).append(wall([sys.executable, "-m", "shambench", *command]))
    ref = statistics.median(runs["reference"])
    print(f"{'command':<22} {'median s':>9} {'x reference':>12}")
    for name, times in runs.items():
        median = statistics.median(times)
        print(f"{name:<22} {median:>9.3f} {median / ref:>12.2f}")
    help_s = statistics.median(runs["--help"])
    ok = help_s < TARGET_HELP_SECONDS and help_s / ref <= TARGET_HELP_RATIO
    print(
        f"--help: {help_s:.3f} s, {help_s / ref:.2f}x the reference "
        f"(targets: under {TARGET_HELP_SECONDS} s, within {TARGET_HELP_RATIO}x): {'met' if ok else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
