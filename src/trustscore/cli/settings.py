"""The command line's client settings: one typed object built from the environment, converted by msgspec.

Every field is set by the environment variable named beside it, and every sub-command's flag of the same
name (``--server``, ``--verifier-key``, ``--key``) defaults from it (:func:`apply_defaults`), so a user
sets them once instead of on every command. Values are converted and checked in one place,
:func:`from_env`, like the server's ``trustscore.settings``: a bad value is one line naming the variable.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import msgspec

from trustscore.errors import ConfigError

Url = Annotated[str, msgspec.Meta(pattern=r"^https?://[^\s]+$", max_length=2048)]
Text = Annotated[str, msgspec.Meta(min_length=1, max_length=4096)]


@dataclass(frozen=True)
class ClientSettings:
    """What the command line needs to talk to a bureau; each field's environment variable beside it."""

    server: Url | None = None  # TRUSTSCORE_SERVER: the trustscore server's URL
    verifier_key: Text | None = None  # TRUSTSCORE_VERIFIER_KEY: the log's verifier key, or a file holding it
    key: Path | None = None  # TRUSTSCORE_KEY: your key file (trustscore keygen)


#: Each field's environment variable and the flag that defaults from it.
ENV = {"server": "TRUSTSCORE_SERVER", "verifier_key": "TRUSTSCORE_VERIFIER_KEY", "key": "TRUSTSCORE_KEY"}


def _path(kind: type, value: Any) -> Any:
    if kind is Path and isinstance(value, str):
        return Path(value)
    raise NotImplementedError(f"cannot convert to {kind}")


def from_env(env: Mapping[str, str] | None = None) -> ClientSettings:
    """Client settings from the environment; unset or empty variables leave a field unset."""
    env = os.environ if env is None else env
    values = {f.name: raw for f in dataclasses.fields(ClientSettings) if (raw := env.get(ENV[f.name]))}
    try:
        return msgspec.convert(values, ClientSettings, strict=False, dec_hook=_path)
    except msgspec.ValidationError as exc:
        message = str(exc)
        name = message.rsplit("$.", 1)[-1].strip("`") if "$." in message else "?"
        problem = message.split(" - at ", 1)[0].replace("`", "")
        raise ConfigError(f"{ENV.get(name, name)} = {values.get(name)!r}: {problem}") from exc


def apply_defaults(parser: argparse.ArgumentParser, settings: ClientSettings) -> None:
    """Make every ``--server``, ``--verifier-key`` and ``--key`` flag of every sub-command default from
    ``settings``: a set field becomes the flag's default (and the flag no longer required), and each
    flag's help names its variable."""
    for action in parser._actions:  # argparse has no public walk of sub-parsers
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                apply_defaults(sub, settings)
            continue
        if action.dest not in ENV or not action.option_strings:
            continue
        value = getattr(settings, action.dest)
        action.help = f"{action.help or ''} [env {ENV[action.dest]}]".strip()
        if value is None or action.default is not None:
            continue
        action.default = value
        action.required = False
        for group in parser._mutually_exclusive_groups:
            if action in group._group_actions:
                group.required = False  # the default stands for the group's choice
