"""The command line in process: --version, defaults in help, and exit codes that tell mistakes apart."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from trustscore.cli.main import EXIT_ERROR, EXIT_UNAVAILABLE, EXIT_USAGE, EXIT_VERIFICATION, main
from trustscore.ledger import checkpoint, keys, merkle, note


def one_line(capsys: pytest.CaptureFixture[str], words: str) -> None:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("trustscore: error:") and words in err[0], err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith("trustscore ")


def test_help_shows_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    assert "(default: info)" in capsys.readouterr().out


def test_usage_error_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["log", "verify", "--no-such-flag"])
    assert exit_.value.code == EXIT_USAGE


def test_bad_input_is_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["score", "--weights", str(tmp_path / "none.toml"), "--evidence", str(tmp_path / "e")]
    assert main([*args, "--at", "2026-11-30T00:00:00Z"]) == EXIT_ERROR
    assert "Traceback" not in capsys.readouterr().err


def test_unreachable_server_is_exit_4(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    vkey = note.make_verifier_key("example/log", keys.SigningKey.generate().public_key)
    code = main(["log", "verify", "--server", f"http://127.0.0.1:{port}", "--verifier-key", vkey])
    assert code == EXIT_UNAVAILABLE
    one_line(capsys, "cannot reach")


def test_a_checkpoint_signed_by_another_key_is_exit_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log_key, impostor = keys.SigningKey.generate(), keys.SigningKey.generate()
    vkey = note.make_verifier_key("example/log", log_key.public_key)
    forged = tmp_path / "checkpoint"
    forged.write_text(
        checkpoint.sign_checkpoint(
            checkpoint.Checkpoint("example/log", 0, merkle.EMPTY_ROOT), impostor, "example/log"
        )
    )
    code = main(
        [
            "log",
            "verify",
            "--server",
            "http://127.0.0.1:9",
            "--verifier-key",
            vkey,
            "--checkpoint",
            str(forged),
        ]
    )
    assert code == EXIT_VERIFICATION
    one_line(capsys, "")
