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


def parse_json(text: str) -> Any:
    """The JSON value that is the whole reply (optionally inside one ``` fence); NaN/Infinity rejected."""
    t = text.strip()
    m = _FENCE.match(t)
    if m:
        t = m.group("body").strip()
    try:
        return json.loads(t, parse_constant=_reject_constant)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise NotJson(f"not JSON: {exc}") from exc
