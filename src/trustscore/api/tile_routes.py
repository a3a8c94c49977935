"""The log as C2SP tlog-tiles (https://c2sp.org/tlog-tiles, docs/tiles.md): ``/checkpoint``,
``/tile/<L>/<N>[.p/<W>]`` and ``/tile/entries/<N>[.p/<W>]``, cacheable by any HTTP cache or mirror."""

from __future__ import annotations

import hashlib
from typing import Any

from litestar import Controller, Request, Response, get
from litestar.datastructures import CacheControlHeader, ResponseHeader, State
from litestar.di import NamedDependency, Provide
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import FromPath

from trustscore.api.conditional import accepts_gzip, etag_matches
from trustscore.api.openapi import READ_PROBLEMS
from trustscore.api.wiring import services_of
from trustscore.errors import InvalidInput
from trustscore.services.tiles import TileService

TEXT = "text/plain"  # Litestar adds "; charset=utf-8" (given here too, it came twice: found by fuzzing)
OCTETS = "application/octet-stream"
IMMUTABLE = "public, max-age=31536000, immutable"  # a full tile never changes
PARTIAL = "public, max-age=60"  # a partial tile is superseded by a wider one
CHECKPOINT_CACHE = CacheControlHeader(public=True, max_age=2)  # the spec: "not beyond a few seconds"

_HEADERS = [
    ResponseHeader(name="ETag", documentation_only=True, description="the tile's SHA-256, hex, quoted"),
    ResponseHeader(
        name="Cache-Control",
        documentation_only=True,
        description=f"full tiles: {IMMUTABLE}; partial: {PARTIAL}",
    ),
]


def tile_service(state: State) -> TileService:
    """The app's tile service: the log service's, whose cache its proofs share (docs/tiles.md)."""
    return services_of(state).log.tiles


Tiles = NamedDependency[TileService]


class TileController(Controller):
    path = "/"
    tags = ["tiles"]  # noqa: RUF012 - Litestar class attribute
    dependencies = {"tile_service": Provide(tile_service, sync_to_thread=False)}  # noqa: RUF012

    @get(
        "/checkpoint",
        operation_id="getTilesCheckpoint",
        media_type=TEXT,
        cache_control=CHECKPOINT_CACHE,
        responses=READ_PROBLEMS,
    )
    async def checkpoint(self, tile_service: Tiles) -> str:
        """The latest checkpoint (C2SP tlog-checkpoint as a signed note), the tlog-tiles way."""
        return await tile_service.checkpoint()

    @get(
        "/tile/{tile_path:path}",
        operation_id="getTile",
        media_type=OCTETS,
        responses={
            200: ResponseSpec(
                bytes,
                description="the tile's hashes or entry bundle",
                media_type=OCTETS,
                generate_examples=False,
            ),
            304: ResponseSpec(None, description="If-None-Match matched the tile's ETag"),
            **READ_PROBLEMS,
        },
        response_headers=_HEADERS,
    )
    async def tile(
        self, request: Request[Any, Any, Any], tile_service: Tiles, tile_path: FromPath[str]
    ) -> Response[bytes]:
        """A hash tile ``<L>/<N>[.p/<W>]`` (256 hashes of level 8L, 32 bytes each) or an entry bundle
        ``entries/<N>[.p/<W>]`` (leaves with big-endian uint16 lengths); 404 beyond the latest checkpoint.
        Bundles are gzipped for clients that accept it. A matching ``If-None-Match`` is a 304."""
        path = "tile/" + tile_path.lstrip("/")
        # The router has already merged repeated slashes, dropped a trailing one and decoded escapes: the
        # path as sent must be the one form (docs/tiles.md), or a cache would keep one tile under many
        # names (/tile/0//000 was served, immutable, found by fuzzing).
        # Compared whole (a prefix of slashes is folded away too, found by review), without a query
        # string (which a test client puts in raw_path), under the root path if there is one.
        sent = request.scope.get("raw_path")
        if sent is not None and sent.partition(b"?")[0] not in _one_form(
            request.scope.get("root_path", ""), path
        ):
            raise InvalidInput(f"tile path {sent[:100].decode('latin-1')!r} is not in its one form (/{path})")
        gzip_ok = accepts_gzip(request.headers.get("accept-encoding", ""))
        tile, data, gzipped = await tile_service.tile(path, gzip_ok=gzip_ok)
        etag = f'"{hashlib.sha256(data).hexdigest()}"'  # of the bytes sent: one per representation
        headers = {"ETag": etag, "Cache-Control": IMMUTABLE if tile.full else PARTIAL}
        if tile.is_entries:
            headers["Vary"] = "Accept-Encoding"
        if gzipped:
            headers["Content-Encoding"] = "gzip"
        if etag_matches(request.headers.get("if-none-match", ""), etag):
            return Response(b"", status_code=304, headers=headers)
        return Response(data, media_type=OCTETS, headers=headers)


def _one_form(root_path: str, path: str) -> tuple[bytes, bytes]:
    """The path of a tile as sent: with or without the root path (a proxy may strip it or pass it)."""
    one = b"/" + path.encode()
    return one, root_path.encode() + one
