"""`python -m shambench` is the `shambench` command."""

from shambench.cli import main

if __name__ == "__main__":
    main(prog_name="shambench")
