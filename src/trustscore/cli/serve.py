"""``trustscore serve``: run the HTTP service on the embedded or an external PostgreSQL."""

from __future__ import annotations

import argparse
import gc
import signal
import sys
from pathlib import Path
from typing import Any

from trustscore import logs
from trustscore import settings as settings_mod
from trustscore.ledger import note
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
    p.set_defaults(func=run)


def resolve_settings(args: argparse.Namespace) -> Settings:
    return settings_mod.from_env().with_overrides(
        host=args.host, port=args.port, data_dir=args.data_dir, database_url=args.database_url
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


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from trustscore.api.app import create_app

    logs.configure()
    s = resolve_settings(args)
    s.data_dir.mkdir(parents=True, exist_ok=True)
    dsn = database_dsn(s)
    key = logkey.load_or_create(s.log_key_file)
    where = "external PostgreSQL" if s.database_url else f"embedded PostgreSQL in {s.pg_dir}"
    print(f"trustscore listening on http://{s.host}:{s.port} ({where})", flush=True)
    print(f"log verifier key: {note.make_verifier_key(s.log_origin, key.public_key)}", flush=True)
    config = uvicorn.Config(
        create_app(s, dsn), host=s.host, port=s.port, log_config=None, access_log=False, lifespan="on"
    )
    server = uvicorn.Server(config)
    tune_gc()
    # uvicorn re-raises SIGTERM/SIGINT after a graceful shutdown; exiting normally instead lets the
    # embedded PostgreSQL's exit hook stop it rather than leave it running.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server.run()
    return 0 if server.started else 1
