"""Structured logs are one JSON object per line."""

from __future__ import annotations

import json
import logging

from trustscore.logs import JsonFormatter


def test_json_lines_carry_extra_fields_and_exceptions() -> None:
    record = logging.makeLogRecord(
        {
            "name": "trustscore.x",
            "levelname": "WARNING",
            "msg": "refused %s",
            "args": ("a",),
            "agent": "ts1_x",
        }
    )
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        record.exc_info = sys.exc_info()
    line = JsonFormatter().format(record)
    data = json.loads(line)
    assert data["msg"] == "refused a" and data["level"] == "warning" and data["agent"] == "ts1_x"
    assert "boom" in data["exc"] and "\n" not in line
