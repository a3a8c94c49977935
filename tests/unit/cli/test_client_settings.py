"""Client settings: one typed object from TRUSTSCORE_SERVER / _VERIFIER_KEY / _KEY, the default of every
sub-command's --server, --verifier-key and --key, named in each flag's help."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from trustscore.cli.main import EXIT_USAGE, build_parser, main
from trustscore.cli.settings import ENV, ClientSettings, from_env
from trustscore.errors import ConfigError


def test_from_env_converts_each_variable() -> None:
    s = from_env(
        {"TRUSTSCORE_SERVER": "http://h:1", "TRUSTSCORE_VERIFIER_KEY": "k+abc", "TRUSTSCORE_KEY": "a.key"}
    )
    assert s == ClientSettings(server="http://h:1", verifier_key="k+abc", key=Path("a.key"))
    assert from_env({"TRUSTSCORE_SERVER": ""}) == ClientSettings()  # empty is unset


@pytest.mark.parametrize("url", ["ftp://h", "127.0.0.1:8080", "http://a b", "http://" + "x" * 3000])
def test_a_bad_server_url_is_refused_naming_the_variable(url: str) -> None:
    with pytest.raises(ConfigError, match="TRUSTSCORE_SERVER"):
        from_env({"TRUSTSCORE_SERVER": url})


def test_a_bad_variable_is_one_line_and_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TRUSTSCORE_SERVER", "not-a-url")
    assert main(["agent", "list"]) == EXIT_USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("trustscore: error: TRUSTSCORE_SERVER")


def _flags(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], argparse.Action]]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += _flags(sub, (*path, name))
        elif action.dest in ENV and action.option_strings:
            out.append((path, action))
    return out


def test_every_server_verifier_key_and_key_flag_defaults_from_the_settings() -> None:
    settings = ClientSettings(server="http://s:1", verifier_key="vk", key=Path("k.key"))
    flags = _flags(build_parser(settings))
    commands = {" ".join(path) for path, _ in flags}
    # The commands that talk to a server or sign (a sample that must all be covered).
    assert {"rating show", "leaderboard", "agent show", "agent list", "agent register", "settle", "onboard",
            "log verify", "log fsck", "evidence export", "exam run", "exam submit", "stats"} <= commands  # fmt: skip
    for path, action in flags:
        assert action.default == getattr(settings, action.dest), path
        assert not action.required, path
        assert f"[env {ENV[action.dest]}]" in (action.help or ""), path
    unset = _flags(build_parser(ClientSettings()))
    assert any(a.required for _, a in unset)  # without settings, required flags stay required


def test_the_env_default_is_used_and_a_flag_overrides_it(tmp_path: Path) -> None:
    parser = build_parser(ClientSettings(server="http://env:1"))
    assert parser.parse_args(["leaderboard"]).server == "http://env:1"
    assert parser.parse_args(["leaderboard", "--server", "http://flag:2"]).server == "http://flag:2"
    # fsck: an explicit --data-dir wins over the environment's server.
    args = parser.parse_args(["log", "fsck", "--data-dir", str(tmp_path)])
    assert args.data_dir == tmp_path


def test_help_names_the_variable(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["leaderboard", "--help"])
    assert "[env TRUSTSCORE_SERVER]" in " ".join(capsys.readouterr().out.split())
