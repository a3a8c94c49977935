"""The service's logs on stderr: one JSON object per line, or plain text lines for a person at a terminal."""

from __future__ import annotations

import json
import logging
import sys
import time

_STANDARD = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "color_message"}


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "msg", ...extra fields, "exc"}`` per record."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                out[key] = value if isinstance(value, str | int | float | bool | None) else repr(value)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """``HH:MM:SS level logger: message`` per record, for a person reading a terminal."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)-7s %(name)s: %(message)s", "%H:%M:%S")


#: Loggers of the protocol SDKs mounted at /mcp and /a2a. They log a client's malformed request (at ERROR,
#: with its traceback) with the request's content in the message: up to a whole body (1 MiB at /a2a,
#: 4 MiB at /mcp) per request, twice. Their records are kept to one line of at most MAX_SDK_MESSAGE.
SDK_LOGGERS = ("mcp", "a2a")
MAX_SDK_MESSAGE = 1_000


class SdkLines(logging.Filter):
    """Each record of :data:`SDK_LOGGERS` made one bounded line: its message with the exception's type
    and text in place of the traceback, line breaks escaped (a client's text could otherwise forge a
    line of its own in the text format), cut to :data:`MAX_SDK_MESSAGE` characters; fields an SDK adds
    (``extra=``, a URI a client sent, say) are dropped."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.partition(".")[0] in SDK_LOGGERS:
            message = record.getMessage()
            if record.exc_info and record.exc_info[1] is not None:
                error = record.exc_info[1]
                message = f"{message} ({type(error).__name__}: {error})"
            message = message.replace("\r", "\\r").replace("\n", "\\n")
            if len(message) > MAX_SDK_MESSAGE:
                message = f"{message[:MAX_SDK_MESSAGE]}... ({len(message)} characters)"
            for key in [k for k in record.__dict__ if k not in _STANDARD]:
                del record.__dict__[key]
            record.msg, record.args = message, None
            record.exc_info = record.exc_text = record.stack_info = None
        return True


FORMATS = ("auto", "json", "text")
LEVELS = ("debug", "info", "warning", "error")


def configure(level: str = "info", fmt: str = "auto") -> None:
    """Send every log record (trustscore's, uvicorn's) to stderr: JSON lines, or text lines when ``fmt``
    is ``text`` (``auto``: text on a terminal, JSON otherwise)."""
    if fmt not in FORMATS or level not in LEVELS:
        raise ValueError(f"log format {fmt!r} / level {level!r}")
    text = fmt == "text" or (fmt == "auto" and sys.stderr.isatty())
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(TextFormatter() if text else JsonFormatter())
    handler.addFilter(SdkLines())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
