"""``trustscore serve``: run the HTTP service on the embedded or an external PostgreSQL."""

from __future__ import annotations

import argparse
import asyncio
import errno
import gc
import signal
import socket
import sys
from pathlib import Path
from typing import Any

from trustscore import logs
from trustscore import settings as settings_mod
from trustscore.errors import ConfigError, StorageError
from trustscore.ledger import keys, note
from trustscore.services import logkey
from trustscore.settings import Settings
from trustscore.store import embedded


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser("serve", help="start the HTTP service")
    p.add_argument("--host", help="address to listen on (default 127.0.0.1, env TRUSTSCORE_HOST)")
    p.add_argument("--port", type=int, help="port (default 8080, env TRUSTSCORE_PORT)")
    p.add_argument(
        "--data-dir", type=Path, help="data directory (default ./.trustscore, env TRUSTSCORE_DATA_DIR)"
    )
    p.add_argument(
        "--database-url",
        help="external PostgreSQL URL (env TRUSTSCORE_DATABASE_URL); default: embedded PostgreSQL in the data dir",
    )
    p.add_argument(
        "--role",
        choices=settings_mod.ROLES,
        help="all: HTTP and background jobs (default); api: HTTP only; worker: background jobs only "
        "(env TRUSTSCORE_ROLE; docs/operations.md)",
    )
    p.add_argument(
        "--read-database-url",
        help="a streaming replica of the database, for public reads (env TRUSTSCORE_READ_DATABASE_URL; "
        "docs/operations.md); default: reads go to the database too",
    )
    p.add_argument(
        "--public-url",
        help="the http(s) URL readers reach the service at, named by the agent card, badges and feeds "
        "(env TRUSTSCORE_PUBLIC_URL; set it behind a cache); default: each request's Host",
    )
    p.add_argument(
        "--reuse-port",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="with --role api: listen with SO_REUSEPORT, so several API processes of this user share the "
        "port and the kernel spreads connections among them (env TRUSTSCORE_REUSE_PORT; docs/operations.md)",
    )
    p.add_argument(
        "--log-format",
        choices=logs.FORMATS,
        default="auto",
        help="log lines as JSON or text (default auto: text on a terminal, JSON otherwise)",
    )
    p.add_argument("--log-level", choices=logs.LEVELS, default="info", help="least severe level logged")
    p.set_defaults(func=run)


def resolve_settings(args: argparse.Namespace) -> Settings:
    return settings_mod.from_env().with_overrides(
        host=args.host,
        port=args.port,
        data_dir=args.data_dir,
        database_url=args.database_url,
        read_database_url=args.read_database_url,
        role=getattr(args, "role", None),
        reuse_port=getattr(args, "reuse_port", None),
        public_url=getattr(args, "public_url", None),
    )


def database_dsn(s: Settings) -> str:
    """The DSN to use: the external URL, or the embedded server (started or re-attached to)."""
    return s.database_url or embedded.start(s.pg_dir)


# Python's cyclic collector runs a young collection every 700 net allocations. A batch of 1000 envelopes
# allocates hundreds of thousands of objects that live until its response is sent, so the default
# collects (and promotes, and later rescans) them over and over; bench/ingest.py measured about 12 %
# more entries/s at batch 1000 with a higher young threshold and the start-up heap frozen.
GC_THRESHOLDS = (50_000, 20, 10)


def tune_gc() -> None:
    """Freeze everything alive after start-up (modules, classes, settings) out of the collector's
    scans and collect the young generation less often. Garbage cycles are still collected."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def listen(host: str, port: int, reuse_port: bool = False) -> socket.socket:
    """A listening socket on ``host:port``, bound before anything else starts so that a taken port fails
    first, with nothing created. With ``reuse_port`` (SO_REUSEPORT), other processes of the same user that
    listen on the port with it too share it, each accepting its share of the connections; a process
    without it still finds the port taken."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ConfigError(
            f"cannot listen on {host}: {exc.strerror}; pass --host with a local address"
        ) from exc
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        if not hasattr(socket, "SO_REUSEPORT"):
            sock.close()
            raise ConfigError("--reuse-port: this system has no SO_REUSEPORT")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        hint = (
            "stop the other process or pass --port (several API processes share a port only if each "
            "passes --reuse-port)"
            if exc.errno == errno.EADDRINUSE
            else "pass --host/--port"
        )
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}; {hint}") from exc
    sock.set_inheritable(True)
    return sock


def check_database(url: str, timeout: float = 10.0, flag: str = "--database-url") -> None:
    """Raise a one-line :class:`StorageError` unless the external PostgreSQL at ``url`` (given by
    ``flag``) answers."""
    import asyncpg

    async def probe() -> None:
        conn = await asyncpg.connect(url, timeout=timeout)
        await conn.close()

    try:
        asyncio.run(probe())
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError, ValueError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise StorageError(f"cannot connect to PostgreSQL ({reason}); check {flag}") from exc


async def check_log_key(s: Settings, dsn: str, key: keys.SigningKey | None) -> None:
    """Raise a one-line :class:`ConfigError` when the database's log was made with another log key than
    the data directory's, or the read database holds another log (checked before the service starts, so
    it is not a start-up traceback)."""
    from trustscore.store import db
    from trustscore.store.log import LogStore

    await db.migrate(dsn)
    pool = await db.create_pool(dsn, min_size=1, max_size=1)
    try:
        store = LogStore(pool)
        await logkey.check_bound(store, s.log_origin, key, s.log_key_file)
        bound = await store.get_meta(logkey.VERIFIER_KEY_META)
    finally:
        await pool.close()
    if s.read_database_url:
        reads = await db.create_pool(s.read_database_url, min_size=1, max_size=1, read_only=True)
        try:
            await logkey.check_replica(LogStore(reads), bound)
        finally:
            await reads.close()


def run(args: argparse.Namespace) -> int:
    """Check what can fail cheaply first (port, database), then start; stop the embedded database on exit."""
    s = resolve_settings(args)
    if s.reuse_port and s.role != "api":
        # A worker serves no API, and an `all` process without the ratings lease serves the ratings of its
        # start: either would answer its share of the port's connections wrongly. (An api process needs
        # an external database, so no two processes share an embedded one.)
        raise ConfigError("--reuse-port is for --role api processes only; run the background jobs apart")
    # The embedded PostgreSQL belongs to one process: the first to exit would stop it for the others.
    if s.role != "all" and not s.database_url:
        raise ConfigError(
            f"--role {s.role} needs an external PostgreSQL shared by every process; pass --database-url"
        )
    sock = listen(s.host, s.port, s.reuse_port)
    try:
        if s.database_url:
            check_database(s.database_url)
        if s.read_database_url:
            check_database(s.read_database_url, flag="--read-database-url")
        logs.configure(level=args.log_level, fmt=args.log_format)
        s.data_dir.mkdir(parents=True, exist_ok=True)
        dsn = database_dsn(s)
        try:
            key = keys.read_key_file(s.log_key_file) if s.log_key_file.exists() else None
            asyncio.run(check_log_key(s, dsn, key))
            return _serve(s, dsn, sock)
        finally:
            if not s.database_url:  # whoever serves a data directory stops its embedded database
                embedded.stop(s.pg_dir)
    finally:
        sock.close()


def _serve(s: Settings, dsn: str, sock: socket.socket) -> int:
    import uvicorn

    from trustscore.api.app import create_app
    from trustscore.cli.http_protocol import OneWriteHttpToolsProtocol, per_address

    key = logkey.load_or_create(s.log_key_file)
    where = "external PostgreSQL" if s.database_url else f"embedded PostgreSQL in {s.pg_dir}"
    where += ", reads from a replica" if s.read_database_url else ""
    print(f"trustscore listening on http://{s.host}:{s.port} ({where}, role {s.role})", flush=True)
    print(f"log verifier key: {note.make_verifier_key(s.log_origin, key.public_key)}", flush=True)
    config = uvicorn.Config(
        create_app(s, dsn),
        host=s.host,
        port=s.port,
        log_config=None,
        access_log=False,
        lifespan="on",
        http=per_address(OneWriteHttpToolsProtocol, s.address_connections),
        timeout_graceful_shutdown=s.shutdown_grace,
    )
    server = uvicorn.Server(config)
    tune_gc()
    # uvicorn re-raises SIGTERM/SIGINT after a graceful shutdown; exiting normally instead lets the
    # caller stop the embedded PostgreSQL rather than leave it running.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server.run(sockets=[sock])
    if not server.started:
        raise StorageError("the service did not start (see the log lines above)")
    return 0
