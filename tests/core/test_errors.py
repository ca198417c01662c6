"""Describing an exception (`shambench.errors.described`) never raises, whatever its class does."""

from __future__ import annotations

import pytest

from shambench.errors import described, message_of


class StrRaises(Exception):
    def __str__(self):
        raise ValueError("no")


class BothRaise(StrRaises):
    def __repr__(self):
        raise SystemExit(1)  # foreign code may raise anything short of Ctrl-C


class NotAString(Exception):
    def __str__(self):
        return 3  # str() raises TypeError on it


class Interrupting(Exception):
    def __str__(self):
        raise KeyboardInterrupt


@pytest.mark.parametrize(
    "err, line",
    [
        (RuntimeError("plain"), "RuntimeError: plain"),
        (GeneratorExit(), "GeneratorExit"),
        (SystemExit(3), "SystemExit: 3"),
        (StrRaises("a", 1), "StrRaises: (its str() raised; repr: StrRaises('a', 1))"),
        (BothRaise(), "BothRaise: (its str() and repr() raised)"),
        (NotAString(), "NotAString: (its str() raised; repr: NotAString())"),
    ],
)
def test_an_exception_is_described_in_one_line_even_when_its_message_raises(err, line):
    assert described(err) == line
    assert message_of(err) == line.partition(": ")[2]


def test_ctrl_c_while_describing_is_not_swallowed():
    with pytest.raises(KeyboardInterrupt):
        described(Interrupting())
