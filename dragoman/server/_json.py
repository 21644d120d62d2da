"""Strict JSON for request bodies: every malformed body is the client's mistake, a typed 400.

:func:`json.loads` alone lets four kinds of body through or out untyped: nesting deeper than the interpreter's
recursion limit raises :class:`RecursionError` (which is no ``ValueError``, so it escaped as a 502); an
integer of thousands of digits fails with advice meant for Python programmers
(``sys.set_int_max_str_digits``); ``NaN`` and ``Infinity`` are not JSON at all; and a key given twice
(``{"target": "xx", "target": "de"}``) silently keeps the last value. :func:`loads` refuses each with an
:class:`~dragoman.errors.InvalidRequest` saying what to send instead; ``example`` (a valid body) ends the
message. Linear in the body: the duplicate check runs once per object (a 2 MB body of empty objects
parses in about 0.2 s instead of 0.07 s) and nothing re-scans the body.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from dragoman.errors import InvalidRequest


class _Refused(ValueError):
    """Raised from a parser hook; its message is the reason, already worded for the client."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Refused(f"the key {key!r} is given twice in one object; give each key once")
            seen.add(key)
    return found


def _constant(name: str) -> Any:
    raise _Refused(f"{name} is not JSON (numbers must be finite)")


def loads(body: bytes | str, *, example: str) -> Any:
    """``body`` parsed as JSON, or :class:`InvalidRequest` saying what is wrong with it."""
    try:
        return json.loads(body, object_pairs_hook=_pairs, parse_constant=_constant)
    except _Refused as exc:
        raise InvalidRequest(f"the body is not valid JSON: {exc}; send a body such as {example}") from None
    except RecursionError:
        raise InvalidRequest(
            "the body is not valid JSON: arrays or objects nested too deeply; a request nests at most "
            f"three levels, as in {example}"
        ) from None
    except UnicodeDecodeError as exc:
        raise InvalidRequest(
            f"the body is not valid JSON: it is not UTF-8 text ({exc.reason} at byte {exc.start}); "
            f"send UTF-8 JSON such as {example}"
        ) from None
    except json.JSONDecodeError as exc:
        raise InvalidRequest(
            f"the body is not valid JSON ({exc}); send a JSON object such as {example}"
        ) from exc
    except ValueError:  # the one other: an integer over the interpreter's digit limit
        raise InvalidRequest(
            f"the body is not valid JSON: a number of more than {sys.get_int_max_str_digits()} digits; "
            f"send a body such as {example}"
        ) from None
