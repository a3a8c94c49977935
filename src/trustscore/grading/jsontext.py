"""Strict extraction of one JSON value from an agent's reply (shared by structured-output graders)."""

from __future__ import annotations

import json
import re
from typing import Any

_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n(?P<body>.*?)\n?```$", re.DOTALL)


class NotJson(ValueError):
    pass


def _reject_constant(name: str) -> Any:
    raise NotJson(f"{name} is not JSON")


# What ``json.loads(t, parse_constant=_reject_constant)`` builds on every call, built once.
_decoder = json.JSONDecoder(parse_constant=_reject_constant)


def parse_json(text: str) -> Any:
    """The JSON value that is the whole reply (optionally inside one ``` fence); NaN/Infinity rejected."""
    t = text.strip()
    m = _FENCE.match(t)
    if m:
        t = m.group("body").strip()
    try:
        if t.startswith("\ufeff"):  # as json.loads refuses it, so that the message stays the same
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", t, 0)
        return _decoder.decode(t)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise NotJson(f"not JSON: {exc}") from exc
