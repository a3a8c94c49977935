"""The byte allowance's wrapper driven directly: when each body is charged, and what a refusal keeps."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from trustscore.api.body_allowance import charged_bodies
from trustscore.api.framing import declared_length
from trustscore.api.mount_bodies import bounded_body
from trustscore.errors import InvalidInput, RateLimited
from trustscore.services.ratelimit import KeyRateLimiter

ADDRESS = "192.0.2.7"


def _limiter(burst: int = 100) -> tuple[KeyRateLimiter, list[float]]:
    now = [0.0]
    return KeyRateLimiter(1.0, burst, clock=lambda: now[0], what="bytes"), now


def _scope(length: bytes | None) -> dict[str, Any]:
    headers = [] if length is None else [(b"content-length", length)]
    return {"type": "http", "method": "POST", "headers": headers, "client": (ADDRESS, 1)}


def _run(
    limiter: KeyRateLimiter, scope: dict[str, Any], chunks: list[bytes]
) -> tuple[list[int], BaseException | None]:
    """The wrapped app reads every chunk of the body; the sizes the client's receive handed over, and
    what the app's read raised."""
    handed: list[int] = []
    left = list(chunks)

    async def receive() -> dict[str, Any]:
        body = left.pop(0)
        handed.append(len(body))
        return {"type": "http.request", "body": body, "more_body": bool(left)}

    async def app(_scope: Any, read: Any, _send: Any) -> None:
        while True:
            message = await read()
            if not message.get("more_body"):
                return

    async def send(_: Any) -> None: ...

    try:
        asyncio.run(charged_bodies(app, limiter)(scope, receive, send))  # type: ignore[arg-type]
    except RateLimited as exc:
        return handed, exc
    return handed, None


def tokens(limiter: KeyRateLimiter) -> float:
    return limiter._buckets[ADDRESS][0]


def test_a_declared_body_is_paid_whole_before_its_first_byte_is_read() -> None:
    """Refused before the client's receive is called (before uvicorn answers 100 Continue)."""
    limiter, _ = _limiter()
    assert _run(limiter, _scope(b"60"), [b"x" * 30, b"x" * 30]) == ([30, 30], None)
    assert tokens(limiter) == 40
    handed, refused = _run(limiter, _scope(b"60"), [b"x" * 60])
    assert handed == [] and isinstance(refused, RateLimited)
    assert tokens(limiter) == 40  # a refusal spends nothing


@pytest.mark.parametrize("length", [b" 60", b"60 ", b"\t60", b"000000000000000000000060"])
def test_a_length_the_parser_accepts_is_read_as_declared(length: bytes) -> None:
    """Blanks around the length and leading zeros (llhttp takes both) do not make it a chunked body."""
    limiter, _ = _limiter()
    limiter.take(ADDRESS, 50)
    handed, refused = _run(limiter, _scope(length), [b"x" * 60])
    assert handed == [] and isinstance(refused, RateLimited)


def test_every_chunk_of_a_chunked_body_is_paid() -> None:
    """(The first version charged a chunked body its first chunk only.)"""
    limiter, _ = _limiter()
    assert _run(limiter, _scope(None), [b"", b"x", b"x" * 40, b"x" * 40]) == ([0, 1, 40, 40], None)
    assert tokens(limiter) == 19


def test_a_chunked_body_refused_part_way_gets_back_what_it_paid() -> None:
    """So a client that waits out Retry-After and sends the body again is not refused for ever: the wait
    named is for every byte received so far."""
    limiter, now = _limiter()
    limiter.take(ADDRESS, 55)  # 45 left
    handed, refused = _run(limiter, _scope(None), [b"x" * 20, b"x" * 20, b"x" * 20, b"x" * 20])
    assert handed == [20, 20, 20] and isinstance(refused, RateLimited)
    assert tokens(limiter) == 45  # the 40 paid are back
    assert refused.extra["retry_after"] == 15  # 60 received, 45 in the bucket, 1 byte a second
    now[0] += 35  # waited out for the whole body of 80
    assert _run(limiter, _scope(None), [b"x" * 20] * 4) == ([20, 20, 20, 20], None)


def test_a_rate_of_zero_wraps_nothing() -> None:
    async def app(_scope: Any, _receive: Any, _send: Any) -> None: ...

    assert charged_bodies(app, KeyRateLimiter(0, 10)) is app


def _retrying(limiter: KeyRateLimiter, scope: dict[str, Any], chunks: list[bytes]) -> list[str]:
    """A reader that catches each refusal and reads on (none does today; review): what each read gave."""
    left = list(chunks)
    seen: list[str] = []

    async def receive() -> dict[str, Any]:
        body = left.pop(0)
        return {"type": "http.request", "body": body, "more_body": bool(left)}

    async def app(_scope: Any, read: Any, _send: Any) -> None:
        while left:
            try:
                seen.append(str(len((await read())["body"])))
            except RateLimited:
                seen.append("refused")
                if len(seen) > 10:
                    return

    async def send(_: Any) -> None: ...

    asyncio.run(charged_bodies(app, limiter)(scope, receive, send))  # type: ignore[arg-type]
    return seen


def test_a_refusal_is_refunded_once_and_a_refused_declared_body_stays_refused() -> None:
    limiter, _ = _limiter()
    limiter.take(ADDRESS, 55)  # 45 left
    seen = _retrying(limiter, _scope(None), [b"x" * 40] * 8)
    assert seen == ["40", "refused"] * 4
    # What was paid since the last refusal is given back, not all the body paid at every refusal (which
    # made tokens from nothing: 85 here before the review's mend).
    assert tokens(limiter) == 45
    assert _retrying(limiter, _scope(b"60"), [b"x" * 60]) == ["refused"] * 11


def test_no_chunk_is_read_on_a_spent_allowance() -> None:
    """Its first read is refused before a byte is read (before uvicorn answers Expect: 100-continue)."""
    limiter, _ = _limiter()
    limiter.take(ADDRESS, 100)
    handed, refused = _run(limiter, _scope(None), [b"x"])
    assert handed == [] and isinstance(refused, RateLimited)


@pytest.mark.parametrize("length", [b"5 ", b"00000000005"])
def test_the_mounts_read_a_length_as_the_parser_does(length: bytes) -> None:
    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"hello", "more_body": False}

    scope: Any = _scope(length)
    assert asyncio.run(bounded_body(scope, receive, 5)) == b"hello"  # type: ignore[arg-type]


@pytest.mark.parametrize("length", [b"12x", b"-1", b"\xb2"])
def test_a_length_that_is_no_number_is_refused(length: bytes) -> None:
    with pytest.raises(InvalidInput, match="Content-Length"):
        declared_length(_scope(length))  # type: ignore[arg-type]
