"""The command line's mistakes, each in process (``main([...])``, issue #18): one line on stderr saying
what went wrong, the documented exit code (docs/sdk.md), no traceback, and nothing created.

No server is needed: an unreachable server is a port nothing listens on, a verification failure is a
report or a checkpoint that does not check out. The mistakes against a live server are in
``tests/integration/service/test_cli.py``.
"""

from __future__ import annotations

import io
import json
import socket
from collections.abc import Sequence
from pathlib import Path

import msgspec
import pytest

from trustscore.canonical import b64decode, b64encode
from trustscore.cli.main import EXIT_ERROR, EXIT_UNAVAILABLE, EXIT_USAGE, EXIT_VERIFICATION, main
from trustscore.exams.loader import ExamDirs, load_exam
from trustscore.ledger import keys, note
from trustscore.resources import ROOT
from trustscore.sdk import agent_from_spec, run_exam
from trustscore.sdk.runner import sign_run

Capture = pytest.CaptureFixture[str]
Argv = Sequence[str | Path]


def run(argv: Argv, capsys: Capture) -> tuple[int, str]:
    """The exit code of ``trustscore ARGV`` run in process (argparse's exits included) and its stderr."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else EXIT_ERROR
    return code, capsys.readouterr().err


def one_line(argv: Argv, capsys: Capture, code: int, *words: str) -> str:
    """Run it and check the mistake is told in one ``trustscore: error:`` line with ``code``."""
    got, err = run(argv, capsys)
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("trustscore: error: "), err
    for w in words:
        assert w in lines[0], err
    assert got == code, (got, err)
    return lines[0]


@pytest.fixture
def dead_server() -> str:
    """A URL nothing listens on (the port was free a moment ago and is closed again)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def vkey() -> str:
    return note.make_verifier_key("example/log", keys.SigningKey.generate().public_key)


@pytest.fixture
def bad_json(tmp_path: Path) -> Path:
    path = tmp_path / "bad.json"
    path.write_text('{"truncated": ')
    return path


# --- usage (exit 2): one line naming the command's help, not argparse's usage block ---------------------


def test_an_unknown_flag_is_one_line_exit_2(capsys: Capture, dead_server: str, vkey: str) -> None:
    argv = ["log", "verify", "--server", dead_server, "--verifier-key", vkey, "--no-such-flag"]
    line = one_line(argv, capsys, EXIT_USAGE, "unrecognized arguments: --no-such-flag")
    assert line.endswith("--help)"), line


def test_an_unknown_command_is_one_line_exit_2(capsys: Capture) -> None:
    one_line(
        ["no-such-command"], capsys, EXIT_USAGE, "invalid choice: 'no-such-command'", "trustscore --help"
    )


def test_a_missing_required_flag_is_one_line_exit_2(capsys: Capture) -> None:
    one_line(["log", "fsck"], capsys, EXIT_USAGE, "one of the arguments --server --database-url --data-dir")
    one_line(["log", "verify"], capsys, EXIT_USAGE, "required: --verifier-key")
    one_line(
        ["log", "verify", "--verifier-key", "k"], capsys, EXIT_USAGE, "one of the arguments --server --tiles"
    )


def test_a_malformed_flag_value_is_one_line_exit_2(capsys: Capture, dead_server: str, vkey: str) -> None:
    argv = ["log", "verify", "--server", dead_server, "--verifier-key", vkey, "--index", "one"]
    one_line(argv, capsys, EXIT_USAGE, "argument --index: invalid int value: 'one'")


# --- settings out of range (exit 1), refused before anything is created --------------------------------


def test_serve_refuses_port_99999_and_creates_nothing(tmp_path: Path, capsys: Capture) -> None:
    data = tmp_path / "data"
    one_line(["serve", "--port", "99999", "--data-dir", data], capsys, EXIT_ERROR, "expected int <= 65535")
    assert not data.exists()


def test_serve_refuses_a_port_from_the_environment_too(
    tmp_path: Path, capsys: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRUSTSCORE_PORT", "0x50")
    data = tmp_path / "data"
    one_line(["serve", "--data-dir", data], capsys, EXIT_ERROR, "TRUSTSCORE_PORT")
    assert not data.exists()


def test_fsck_of_a_missing_data_dir_creates_nothing(tmp_path: Path, capsys: Capture) -> None:
    missing = tmp_path / "none"
    one_line(["log", "fsck", "--data-dir", missing], capsys, EXIT_ERROR, "holds no embedded database")
    assert not missing.exists()


# --- files: missing, unreadable, not JSON (exit 1) ------------------------------------------------------


def test_a_missing_file_is_one_line(tmp_path: Path, capsys: Capture, dead_server: str, vkey: str) -> None:
    missing = tmp_path / "missing.json"
    one_line(
        ["rating", "verify", missing, "--verifier-key", vkey], capsys, EXIT_ERROR, "cannot read", "missing"
    )
    one_line(["exam", "grade", missing], capsys, EXIT_ERROR, str(missing))
    one_line(["rating", "verify-vc", missing], capsys, EXIT_ERROR, str(missing))
    register: Argv = ["agent", "register", "--key", missing, "--name", "x", "--server", dead_server]
    one_line(register, capsys, EXIT_ERROR, "key file", str(missing))
    verify: Argv = ["log", "verify", "--server", dead_server, "--verifier-key", vkey, "--checkpoint", missing]
    one_line(verify, capsys, EXIT_ERROR, str(missing))


def test_bad_json_is_one_line(bad_json: Path, capsys: Capture, vkey: str, dead_server: str) -> None:
    one_line(["rating", "verify", bad_json, "--verifier-key", vkey], capsys, EXIT_ERROR, "not a rating")
    one_line(["rating", "verify-vc", bad_json], capsys, EXIT_ERROR, "not JSON")
    one_line(["exam", "grade", bad_json], capsys, EXIT_ERROR, "not JSON")
    one_line(["exam", "submit", bad_json, "--server", dead_server], capsys, EXIT_ERROR, "not JSON")


def test_bad_json_on_stdin_is_one_line(capsys: Capture, monkeypatch: pytest.MonkeyPatch, vkey: str) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"[1, 2")))
    one_line(["rating", "verify", "-", "--verifier-key", vkey], capsys, EXIT_ERROR, "not a rating")


def test_json_of_the_wrong_shape_is_one_line(tmp_path: Path, capsys: Capture) -> None:
    for i, doc in enumerate(([], {"payload": 7}, "x" * 10, {"payloadType": None, "signatures": "no"})):
        path = tmp_path / f"wrong{i}.json"
        path.write_text(json.dumps(doc))
        one_line(["exam", "grade", path], capsys, EXIT_ERROR)


def test_score_names_each_bad_line_then_one_error(tmp_path: Path, capsys: Capture) -> None:
    """``score`` reports every bad input line as FILE:LINE (docs/sdk.md), then the one error line."""
    evidence = tmp_path / "evidence.jsonl"
    evidence.write_text('{bad\n"a string"\n')
    weights = ROOT / "weights" / "trustscore-v2.toml"
    code, err = run(
        ["score", "--weights", weights, "--evidence", evidence, "--at", "2026-11-30T00:00:00Z"], capsys
    )
    lines = err.strip().splitlines()
    assert code == EXIT_ERROR and "Traceback" not in err
    assert [line.split(": ", 1)[0] for line in lines[:-1]] == [f"{evidence}:1", f"{evidence}:2"], err
    assert lines[-1] == "trustscore: error: 2 bad input line(s); nothing was scored", err


def test_keygen_refuses_to_overwrite(tmp_path: Path, capsys: Capture) -> None:
    key = tmp_path / "agent.key"
    assert main(["keygen", "--out", str(key)]) == 0
    before = key.read_bytes()
    capsys.readouterr()
    one_line(["keygen", "--out", key], capsys, EXIT_ERROR, "refusing to overwrite")
    assert key.read_bytes() == before
    one_line(["keygen", "--out", tmp_path / "no" / "dir.key"], capsys, EXIT_ERROR, "cannot create")


def test_a_malformed_verifier_key_is_one_line(capsys: Capture, dead_server: str) -> None:
    argv = ["log", "verify", "--server", dead_server, "--verifier-key", "not-a-key"]
    one_line(argv, capsys, EXIT_ERROR, "verifier key")


# --- the server cannot be reached (exit 4) -------------------------------------------------------------


def test_an_unreachable_server_is_exit_4(
    tmp_path: Path, capsys: Capture, dead_server: str, vkey: str
) -> None:
    key = tmp_path / "agent.key"
    assert main(["keygen", "--out", str(key)]) == 0
    capsys.readouterr()
    out = tmp_path / "evidence.jsonl"
    export: Argv = [
        "evidence",
        "export",
        "--server",
        dead_server,
        "--verifier-key",
        vkey,
        "--evidence-out",
        out,
    ]
    argvs: list[Argv] = [
        ["agent", "register", "--key", key, "--name", "x", "--server", dead_server],
        ["log", "fsck", "--server", dead_server, "--verifier-key", vkey],
        [*export, "--snapshots-out", tmp_path / "snapshots.jsonl"],
        ["scope", "show", "ts1_" + "0" * 40, "--server", dead_server],
    ]
    for argv in argvs:
        one_line(argv, capsys, EXIT_UNAVAILABLE, "cannot reach")
    assert not out.exists(), "a half-written export"


# --- verification failures (exit 3) --------------------------------------------------------------------


def test_a_report_whose_signature_does_not_verify_is_exit_3(tmp_path: Path, capsys: Capture) -> None:
    exam = load_exam("integrity@1", ExamDirs())
    agent = agent_from_spec(f"python:{ROOT / 'examples' / 'agents' / 'scripted.py'}:good")
    try:
        envelope = sign_run(run_exam(exam, agent), keys.SigningKey.generate())
    finally:
        agent.close()
    report = msgspec.to_builtins(envelope)
    good = tmp_path / "good.json"
    good.write_bytes(msgspec.json.encode(report))
    assert main(["exam", "grade", str(good)]) == 0  # the control: the untouched report verifies
    capsys.readouterr()

    # The same statement under a signature with one bit flipped.
    signature = bytearray(b64decode(report["signatures"][0]["sig"], what="signature"))
    signature[0] ^= 1
    report["signatures"][0]["sig"] = b64encode(bytes(signature))
    forged = tmp_path / "forged.json"
    forged.write_bytes(msgspec.json.encode(report))
    one_line(["exam", "grade", forged], capsys, EXIT_VERIFICATION, "signature")
