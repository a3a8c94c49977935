"""The reading and onboarding commands' mistakes, in process (``main([...])``): each is one line on stderr
and the documented exit code, never a traceback. Servers here are real HTTP servers on real ports: a closed
port (down), and one that answers garbage."""

from __future__ import annotations

import http.server
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from trustscore.cli.main import EXIT_ERROR, EXIT_UNAVAILABLE, EXIT_USAGE, main
from trustscore.ledger import keys

AGENT = "ts1_" + "ab" * 20


def one_line(capsys: pytest.CaptureFixture[str], words: str) -> None:
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("trustscore: error:") and words in err[0], err
    assert "Traceback" not in captured.err


@pytest.fixture
def down() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    return f"http://127.0.0.1:{port}"


class _Garbage(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<html>not json</html>"
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def garbage() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Garbage)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "k.key"
    keys.write_key_file(path, keys.SigningKey.generate())
    return path


READS = [
    ["rating", "show", AGENT],
    ["leaderboard"],
    ["agent", "show", AGENT],
    ["agent", "list"],
]


@pytest.mark.parametrize("argv", READS, ids=lambda a: " ".join(a[:2]))
def test_server_down_is_exit_4(argv: list[str], down: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*argv, "--server", down]) == EXIT_UNAVAILABLE
    one_line(capsys, "cannot reach")


@pytest.mark.parametrize("argv", READS, ids=lambda a: " ".join(a[:2]))
def test_a_server_answering_garbage_is_exit_1(
    argv: list[str], garbage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, "--server", garbage]) == EXIT_ERROR
    one_line(capsys, "did not return JSON")


@pytest.mark.parametrize(
    "argv",
    [["rating", "show", "ts1_zz"], ["agent", "show", "../../v1/log/key"], ["agent", "list", "--after", "x"],
     ["settle", "not-an-id", "--role", "buyer", "--delivery", "pass"]],
)  # fmt: skip
def test_a_bad_agent_id_is_refused_before_any_request(
    argv: list[str], down: str, key_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = ["--key", str(key_file)] if argv[0] == "settle" else []
    assert main([*argv, *extra, "--server", down]) == EXIT_ERROR  # not 4: nothing was sent
    one_line(capsys, "is not an agent id")


def test_a_missing_key_file_is_one_line(
    tmp_path: Path, down: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["settle", AGENT, "--key", str(tmp_path / "none.key"), "--role", "buyer", "--delivery", "pass"]
    assert main([*argv, "--server", down]) == EXIT_ERROR
    one_line(capsys, "none.key")


def test_a_settlement_the_server_would_refuse_is_refused_here(
    key_file: Path, down: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A buyer cannot report payment: checked locally with the server's rules, nothing sent (exit 1)."""
    assert (
        main(
            [
                "settle",
                AGENT,
                "--key",
                str(key_file),
                "--role",
                "buyer",
                "--payment",
                "pass",
                "--server",
                down,
            ]
        )
        == EXIT_ERROR
    )
    one_line(capsys, "payment is reported by the seller only")


def test_onboard_with_a_garbage_key_file_is_one_line(
    tmp_path: Path, down: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.key"
    bad.write_text("not a key")
    argv = ["onboard", "--agent", "python:x.py:f", "--name", "n", "--key", str(bad), "--server", down]
    assert main(argv) == EXIT_ERROR
    one_line(capsys, "")
    assert bad.read_text() == "not a key"  # never overwritten


def test_onboard_with_the_server_down_makes_the_key_and_exits_4(
    tmp_path: Path, down: str, capsys: pytest.CaptureFixture[str]
) -> None:
    key = tmp_path / "new.key"
    argv = ["onboard", "--agent", "python:examples/agents/scripted.py:good", "--name", "n", "--key", str(key)]
    assert main([*argv, "--server", down]) == EXIT_UNAVAILABLE
    captured = capsys.readouterr()
    assert key.exists() and "Traceback" not in captured.err
    assert captured.err.strip().splitlines()[-1].startswith("trustscore: error: cannot reach")


@pytest.mark.parametrize("limit", ["0", "1001", "x"])
def test_a_limit_out_of_range_is_a_usage_error(
    limit: str, down: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["leaderboard", "--limit", limit, "--server", down])
    assert exit_.value.code == EXIT_USAGE
    assert "--limit" in capsys.readouterr().err
