"""The control characters that text read from a file or sent by a server must not carry to a reader unescaped."""

from __future__ import annotations

# Tab and line feed: part of a response or a message, never of an id or a name.
LAYOUT = "\t\n"
# Every other C0 and C1 control character, DEL, and the bidirectional overrides and isolates: on a terminal, in a
# log or on a page they would be an escape sequence, a carriage return or text shown in another order.
FOREIGN = "\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069"
# What no id or name holds (a regex character class, as FOREIGN).
IN_NAMES = LAYOUT + FOREIGN
