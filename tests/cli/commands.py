"""The CLI's commands enumerated from its click group, for the class tests that must cover a command added later."""

from __future__ import annotations

from collections.abc import Iterator

import click

from shambench.cli import main


def every_command(
    command: click.Command = main, ctx: click.Context | None = None
) -> Iterator[tuple[str, click.Command]]:
    """(command path, command) of the command line and every group and command below it (`shambench data verify`)."""
    ctx = ctx or click.Context(main, info_name="shambench")
    yield ctx.command_path, command
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None
            yield from every_command(sub, click.Context(sub, info_name=name, parent=ctx))


def runnable_commands() -> dict[str, click.Command]:
    """The commands that run (not the groups), by their path after `shambench` (`data verify`)."""
    return {
        path.removeprefix("shambench "): command
        for path, command in every_command()
        if not isinstance(command, click.Group)
    }
