"""The log's Ed25519 key: created once in the data directory, bound to the database on first use."""

from __future__ import annotations

from pathlib import Path

from trustscore.errors import ConfigError
from trustscore.ledger import keys, note
from trustscore.store.log import LogStore

VERIFIER_KEY_META = "log_verifier_key"


def load_or_create(path: Path) -> keys.SigningKey:
    """Read the log key at ``path``, creating it (mode 0600) if it does not exist yet."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            keys.write_key_file(path, keys.SigningKey.generate())
        except Exception:
            if not path.exists():  # lost a race with another process creating it: fine
                raise
    return keys.read_key_file(path)


def _other_key(stored: str, configured: str) -> ConfigError:
    return ConfigError(
        f"this database's log is signed by {stored}, but the configured log key is {configured}; "
        "use the original key file (or another database)"
    )


async def bind(store: LogStore, origin: str, key: keys.SigningKey) -> str:
    """Record the log's verifier key in the database, refusing to sign one log with two keys."""
    vkey = note.make_verifier_key(origin, key.public_key)
    stored = await store.put_meta_once(VERIFIER_KEY_META, vkey)
    if stored != vkey:
        raise _other_key(stored, vkey)
    return vkey


async def check_bound(store: LogStore, origin: str, key: keys.SigningKey | None, path: Path) -> None:
    """Raise :class:`ConfigError` unless ``key`` (read from ``path``; None: there is no file) is the one
    the database's log is bound to (a database with no log yet accepts any key). Creates nothing:
    ``serve`` checks this first."""
    stored = await store.get_meta(VERIFIER_KEY_META)
    if stored is None:
        return
    if key is None:
        raise ConfigError(
            f"this database's log is signed by {stored}, but there is no log key at {path}; "
            "use the original data directory (or another database)"
        )
    vkey = note.make_verifier_key(origin, key.public_key)
    if stored != vkey:
        raise _other_key(stored, vkey)


async def check_replica(reads: LogStore, bound: str | None) -> None:
    """Raise :class:`ConfigError` when the read database's log is bound to another verifier key than
    ``bound``, the primary's (None: the primary has no log yet): it is not a replica of the primary. One
    that has not replayed the binding yet is accepted."""
    stored = await reads.get_meta(VERIFIER_KEY_META)
    if stored is not None and stored != bound:
        raise ConfigError(
            f"the read database holds the log signed by {stored}, not this database's "
            f"({bound or 'no log yet'}); --read-database-url must name a replica of --database-url"
        )
