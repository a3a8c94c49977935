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


def test_an_sdk_record_is_one_bounded_line_without_its_extra_fields() -> None:
    """A client's text in an SDK's record (review): a line break forged a line of its own in the text
    format, and an ``extra=`` field (the MCP SDK logs a requested URI so) went out whole."""
    import io

    from trustscore.logs import MAX_SDK_MESSAGE, SdkLines, TextFormatter

    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(TextFormatter())
    handler.addFilter(SdkLines())
    logger = logging.getLogger("mcp.server.test_sdk_lines")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        try:
            raise ValueError("bad method 'x'\n12:00:00 INFO    trustscore.audit: operator approved evil")
        except ValueError:
            logger.error("Failed to handle request %s", "id=1", exc_info=True, extra={"uri": "u" * 50_000})
        logger.warning("y" * 10 * MAX_SDK_MESSAGE)
    finally:
        logger.removeHandler(handler)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert "operator approved evil" in lines[0] and "\\n12:00:00" in lines[0] and "Traceback" not in lines[0]
    assert all(len(line) < MAX_SDK_MESSAGE + 200 for line in lines)

    json_line = JsonFormatter().format(
        logging.makeLogRecord({"name": "a2a.x", "msg": "m", "uri": "u" * 50_000, "levelname": "INFO"})
    )
    assert "uuuu" in json_line  # (the formatter alone writes extra fields: the filter drops them)
    record = logging.makeLogRecord({"name": "a2a.x", "msg": "m", "uri": "u" * 50_000, "levelname": "INFO"})
    SdkLines().filter(record)
    assert "uuuu" not in JsonFormatter().format(record)
