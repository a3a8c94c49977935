"""Which refused requests the server logs as its own errors: a 503 ``busy`` (overload the client is told
to retry, which anyone can cause by asking for costly answers) is a warning, not an error, so filling a
budget on purpose does not flood the error log; other 5xx stay errors."""

from __future__ import annotations

import logging

import pytest

from trustscore.api.problems import error_problem
from trustscore.errors import Busy, NotFound, StorageError


def test_busy_is_a_warning_and_storage_an_error(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="trustscore.api.problems"):
        content, headers = error_problem(Busy("the budget is full", retry_after=5), "/v1/x")
        error_problem(StorageError("the database went away"), "/v1/y")
        error_problem(NotFound("no such agent"), "/v1/z")
    assert content["status"] == 503 and headers == {"Retry-After": "5"}
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.WARNING, "busy: the budget is full"),
        (logging.ERROR, "storage: the database went away"),
    ]
