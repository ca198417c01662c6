"""`python -m shambench` is the `shambench` command."""

from shambench.cli import run

if __name__ == "__main__":
    run()
