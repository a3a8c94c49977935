"""A server answering JSON of another shape or depth than a command reads, a file nested too deeply, a
URL the HTTP client cannot parse, an output directory that is a file: one line on stderr and a non-zero
exit, never a traceback (found by an adversarial review, 2026-12-07: each of these printed one)."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.cli.test_reading_mistakes import AGENT, key_file, one_line
from trustscore.cli.main import EXIT_ERROR, main

__all__ = ["key_file"]  # (a fixture used here)

ANSWERS = {
    "list": b"[1, 2, 3]",
    "wrong fields": b'{"entries": "x", "agents": 5, "ratings": 7, "dimensions": 1, "items": null}',
    "nested": b"[" * 200_000 + b"]" * 200_000,
}


def _serving(
    body: bytes, status: int = 200, media: str = "application/json"
) -> type[http.server.BaseHTTPRequestHandler]:
    class Answer(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            if length:
                self.rfile.read(length)
            self.send_response(status)
            self.send_header("content-type", media)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *args: object) -> None:
            pass

    return Answer


@pytest.fixture(params=list(ANSWERS), ids=list(ANSWERS))
def odd(request: pytest.FixtureRequest) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _serving(ANSWERS[request.param]))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


COMMANDS = [
    ["agent", "show", AGENT],
    ["agent", "list"],
    ["rating", "show", AGENT],
    ["leaderboard"],
    ["stats", "--group-by", "model"],
    ["scope", "show", AGENT],
]


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_an_answer_of_another_shape_is_one_line(
    argv: list[str], odd: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, "--server", odd]) != 0
    one_line(capsys, "")


def test_registering_against_an_odd_answer_is_one_line(
    odd: str, key_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["agent", "register", "--key", str(key_file), "--name", "a", "--endpoint", "https://a.example/x"]
    assert main([*argv, "--server", odd]) != 0
    one_line(capsys, "")


@pytest.fixture
def deep(tmp_path: Path) -> Path:
    path = tmp_path / "deep.json"
    path.write_bytes(b"[" * 100_000 + b"]" * 100_000)
    return path


@pytest.mark.parametrize(
    "argv",
    [
        ["exam", "submit", "{}", "--server", "http://127.0.0.1:9"],
        ["exam", "grade", "{}"],
        ["rating", "verify-vc", "{}"],
    ],
    ids=["exam submit", "exam grade", "rating verify-vc"],
)
def test_a_file_nested_too_deeply_is_one_line(
    argv: list[str], deep: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([a.replace("{}", str(deep)) for a in argv]) == EXIT_ERROR
    one_line(capsys, "")


def test_a_key_file_nested_too_deeply_is_one_line(deep: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["agent", "register", "--key", str(deep), "--name", "a", "--endpoint", "https://a.example/x"]
    assert main([*argv, "--server", "http://127.0.0.1:9"]) != 0
    one_line(capsys, "")


def test_a_server_url_the_client_cannot_parse_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["agent", "show", AGENT, "--server", "http://[::1"]) != 0
    one_line(capsys, "")


def test_mirroring_into_a_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`log mirror --out` naming a file: refused before anything is read or written."""
    out = tmp_path / "a-file"
    out.write_text("x")
    argv = ["log", "mirror", "--tiles", "http://127.0.0.1:9", "--verifier-key", "x", "--out", str(out)]
    assert main(argv) != 0
    one_line(capsys, "is not a directory")
    assert out.read_text() == "x"


def test_an_empty_deal_id_is_refused_before_anything_is_sent(
    key_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`settle --deal-id ""` made up a random deal id and logged the settlement (review): the server
    here is a closed port, so a refusal before sending is the only one-line answer naming --deal-id."""
    argv = [
        "settle",
        AGENT,
        "--key",
        str(key_file),
        "--role",
        "buyer",
        "--delivery",
        "pass",
        "--deal-id",
        " ",
    ]
    assert main([*argv, "--server", "http://127.0.0.1:9"]) == EXIT_ERROR
    one_line(capsys, "--deal-id is empty")


@pytest.mark.parametrize(
    "body", [b"[1]", b"[" * 100_000, b'{"detail": "busy"}'], ids=["list", "deep", "dict"]
)
def test_a_503_of_any_problem_shape_is_exit_4(body: bytes, capsys: pytest.CaptureFixture[str]) -> None:
    """A 503 whose problem body was a list (or nested too deeply) exited 1 with an AttributeError
    (RecursionError) in place of 4, 'server refused (503)' (review)."""
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), _serving(body, 503, "application/problem+json")
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert main(["agent", "show", AGENT, "--server", f"http://127.0.0.1:{server.server_address[1]}"]) == 4
    finally:
        server.shutdown()
        server.server_close()
    one_line(capsys, "server refused (503)")


def test_with_trustscore_debug_the_traceback_is_shown(
    deep: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The last resorts hide where an error came from (a bug looks the same as an odd answer from
    outside, review): TRUSTSCORE_DEBUG lets it through."""
    monkeypatch.setenv("TRUSTSCORE_DEBUG", "1")
    with pytest.raises(RecursionError):
        main(["exam", "grade", str(deep)])


def _endless(chunk: bytes, chunks: int) -> type[http.server.BaseHTTPRequestHandler]:
    class Endless(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(16 << 30))  # declares 16 GiB
            self.end_headers()
            try:
                for _ in range(chunks):
                    self.wfile.write(chunk)
            except OSError:
                pass  # the client stopped reading

        def log_message(self, *args: object) -> None:
            pass

    return Endless


def test_an_answer_without_end_is_read_within_a_bound(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A server answering without end took a command to 585 MB before the connection dropped (review):
    the client reads at most MAX_ANSWER bytes of an answer (here lowered to 1 MiB; 8 MiB are sent)."""
    from trustscore import client

    monkeypatch.setattr(client, "MAX_ANSWER", 1 << 20)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _endless(b"[" + b" " * 65535, 128))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        code = main(["agent", "show", AGENT, "--server", f"http://127.0.0.1:{server.server_address[1]}"])
    finally:
        server.shutdown()
        server.server_close()
    assert code == EXIT_ERROR
    one_line(capsys, "answered more than 1048576 bytes")


def test_a_servers_words_are_printed_on_one_line_without_control_characters(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A problem's detail with a line break forged a second line ('FAKE: trustscore: ok'), and an escape
    sequence reached the terminal (review): both come out escaped."""
    body = b'{"detail": "line1\\nFAKE: trustscore: ok\\u001b[2J\\u001b[31mred"}'
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), _serving(body, 503, "application/problem+json")
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert main(["agent", "list", "--server", f"http://127.0.0.1:{server.server_address[1]}"]) == 4
    finally:
        server.shutdown()
        server.server_close()
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "\x1b" not in err and "\\nFAKE" in err, err


def test_trustscore_debug_0_is_off(
    deep: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TRUSTSCORE_DEBUG", "0")
    assert main(["exam", "grade", str(deep)]) == EXIT_ERROR
    one_line(capsys, "nested too deeply")


def test_a_reader_gone_before_the_exit_flush_is_quiet(tmp_path: Path) -> None:
    """Output block-buffered, the reader already gone: the flush at exit raised outside main and Python
    printed 'Exception ignored ... BrokenPipeError' with exit 120 (review)."""
    import os
    import subprocess
    import sys

    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "trustscore.cli.main", "exam", "list"],
            stdout=write,
            stderr=subprocess.PIPE,
            env={k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"},
            timeout=60,
            check=False,
        )
    finally:
        os.close(write)
    assert proc.returncode == EXIT_ERROR and b"Exception ignored" not in proc.stderr, proc.stderr[-500:]
    assert b"Traceback" not in proc.stderr
