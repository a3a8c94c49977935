"""A client of a log served as C2SP tlog-tiles (docs/tiles.md), over HTTP or from a directory mirror.

:class:`TileClient` reads ``<prefix>/checkpoint``, ``<prefix>/tile/<L>/<N>[.p/<W>]`` and
``<prefix>/tile/entries/<N>[.p/<W>]`` and offers the reads of :class:`~trustscore.client.LogClient`
(checkpoint, entries, inclusion and consistency proofs, a key's card) computed from tiles, so that
:class:`~trustscore.verifying.VerifyingClient`, ``fsck`` and ``evidence export`` work on a mirror or a
CDN alone. Nothing it returns is trusted: :meth:`TileClient.verify` rebuilds the whole tree from the
tiles against a verified checkpoint and checks every entry's leaf hash; proofs are checked by callers.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import msgspec

from trustscore.client import LogClient
from trustscore.errors import InvalidInput, NotFound, ProofError, StorageError
from trustscore.ledger import audit, merkle, tiles
from trustscore.ledger.checkpoint import Checkpoint, parse_checkpoint
from trustscore.ledger.tiles import Tile

MAX_CHECKPOINT = 64 * 1024
MAX_BUNDLE = tiles.WIDTH * (2 + tiles.MAX_ENTRY)
CACHE_TILES = 4096  # hash tiles kept (at most 32 MiB): a tile of a given width never changes
#: The problem a trustscore server answers for an entry bundle holding an entry over 65,535 bytes.
TOO_LARGE = "/entry-too-large-for-tiles"
#: Bytes of a 404 answer read to tell that problem from a plain "not found".
MAX_PROBLEM = 64 * 1024


class BundleTooLarge(NotFound):
    """The server cannot put an entry of this bundle in a tlog-tiles bundle (uint16 lengths)."""


@dataclass(frozen=True)
class TreeReport:
    """What :meth:`TileClient.verify` checked: tiles fetched and entries whose leaf hash matched."""

    size: int
    tiles: int
    entries: int
    from_api: tuple[int, ...] = ()  # bundles read from the server's entries API (an entry too large)


class TileClient:
    """Read a tiled log at ``source``: an http(s) URL prefix or a local directory (a static mirror)."""

    def __init__(
        self,
        source: str,
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
        cache_tiles: int = CACHE_TILES,
    ) -> None:
        self.source = source.rstrip("/")
        self._http: httpx.Client | None = None
        self._dir: Path | None = None
        if source.startswith(("http://", "https://")):
            self._http = httpx.Client(base_url=self.source + "/", timeout=timeout, transport=transport)
        else:
            self._dir = Path(source.removeprefix("file://"))
            if not self._dir.is_dir():
                raise InvalidInput(f"tiles source {source!r} is neither an http(s) URL nor a directory")
        self._cache: dict[Tile, bytes] = {}
        self.cache_tiles = cache_tiles
        self.fetched = 0  # resources fetched (not counting the cache)
        self.size: int | None = None  # of the last checkpoint read (unverified: bounds key scans only)

    def close(self) -> None:
        if self._http is not None:
            self._http.close()

    def __enter__(self) -> TileClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- resources ---------------------------------------------------------------------------------

    def _get(self, path: str, limit: int) -> bytes:
        self.fetched += 1
        if self._dir is not None:
            file = self._dir / path
            try:
                with file.open("rb") as f:
                    data = f.read(limit + 1)
            except FileNotFoundError:
                raise NotFound(f"{self.source}/{path}: no such file") from None
            except OSError as exc:
                raise StorageError(f"cannot read {file}: {exc.strerror}") from exc
        else:
            assert self._http is not None
            try:
                with self._http.stream("GET", path) as r:
                    if r.status_code == 404:
                        if _too_large(r):
                            raise BundleTooLarge(f"{self.source}/{path}: holds an entry too large for tiles")
                        raise NotFound(f"{self.source}/{path}: not found")
                    if r.status_code != 200:
                        raise StorageError(f"{self.source}/{path}: HTTP {r.status_code}")
                    data = b""
                    for chunk in r.iter_bytes():
                        data += chunk
                        if len(data) > limit:
                            break
            except httpx.HTTPError as exc:
                raise StorageError(f"cannot reach {self.source}: {exc}") from exc
        if len(data) > limit:
            raise ProofError(f"{self.source}/{path} is larger than {limit} bytes")
        return data

    def checkpoint(self) -> str:
        """The checkpoint note as served (verify it with :func:`~trustscore.ledger.checkpoint.open_checkpoint`)."""
        data = self._get("checkpoint", MAX_CHECKPOINT)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInput(f"{self.source}/checkpoint is not UTF-8") from exc
        split = text.rfind("\n\n")
        try:
            self.size = parse_checkpoint(text[: split + 1]).size if split > 0 else None
        except InvalidInput:
            self.size = None
        return text

    def tile(self, tile: Tile) -> bytes:
        """The bytes of ``tile``; a partial tile no longer served is cut from its full tile (the spec's
        fallback). Sizes are checked: a hash tile is ``32 * width`` bytes."""
        if (data := self._cache.get(tile)) is not None:
            return data
        limit = MAX_BUNDLE if tile.is_entries else tile.width * merkle.HASH_SIZE
        try:
            data = self._get(tile.path(), limit)
        except NotFound as exc:
            if tile.full or isinstance(exc, BundleTooLarge):  # (a wider bundle holds the same entry)
                raise
            return self._cut(tile)
        if not tile.is_entries and len(self._cache) < self.cache_tiles:  # any width: immutable
            self._cache[tile] = data
        return data

    def _cut(self, tile: Tile) -> bytes:
        """A partial tile the source no longer serves, cut from a wider one: the width of the last
        checkpoint read, else the full tile (the spec lets logs delete superseded partial tiles)."""
        now = tiles.width_at(tile.level or 0, tile.index, self.size or 0)
        for width in sorted({now, tiles.WIDTH}):
            if width <= tile.width:
                continue
            wider = Tile(tile.level, tile.index, width)
            try:
                data = self.tile(wider)
            except NotFound:
                continue
            if tile.is_entries:
                return tiles.encode_bundle(tiles.decode_bundle(wider, data)[: tile.width])
            return data[: tile.width * merkle.HASH_SIZE]
        raise NotFound(f"{self.source}/{tile.path()}: not found, nor any wider tile")

    def fetch(self, wanted: Iterable[Tile]) -> dict[Tile, bytes]:
        """:data:`trustscore.ledger.tiles.Fetch` over this source."""
        return {t: self.tile(t) for t in wanted}

    def hashes(self, tile: Tile) -> list[bytes]:
        return tiles.decode_hashes(tile, self.tile(tile))

    def bundle(self, tile: Tile) -> list[bytes]:
        """The entries of bundle ``tile``. One a trustscore server cannot serve as a bundle (an entry over
        65,535 bytes, which the spec's uint16 lengths cannot carry) is read from the same server's
        entries API, and its leaves are checked against their level-0 tile before they are returned: a
        tiles-only source cannot serve them at all (docs/tiles.md, "Limits")."""
        try:
            return tiles.decode_bundle(tile, self.tile(tile))
        except BundleTooLarge:
            return self._from_api(tile)

    def _from_api(self, tile: Tile) -> list[bytes]:
        first = tiles.WIDTH * tile.index
        with LogClient(self.source) as api:
            pairs = api.entries(first, first + tile.width)
        leaves = [leaf for _, leaf in pairs]
        if len(leaves) != tile.width:
            raise ProofError(f"{self.source}: entries {first}..{first + tile.width - 1} incomplete")
        check_bundle(tile, leaves, self.hashes(Tile(0, tile.index, tile.width)))
        self.fetched += 1
        return leaves

    # --- LogClient's reads, from tiles ---------------------------------------------------------------

    def entry_pages(self, start: int, end: int) -> Iterator[list[tuple[int, bytes]]]:
        """Entries ``[start, end)``, one bundle at a time (bundles of the last checkpoint read, if larger)."""
        if not 0 <= start <= end:
            raise InvalidInput(f"bad entry range [{start}, {end})")
        tree = max(end, self.size or 0)
        for n in range(start // tiles.WIDTH, -(-end // tiles.WIDTH)):
            first = n * tiles.WIDTH
            leaves = self.bundle(tiles.tile_at(None, n, tree))
            yield [(first + i, leaf) for i, leaf in enumerate(leaves) if start <= first + i < end]

    def entries(self, start: int, end: int) -> list[tuple[int, bytes]]:
        return [e for page in self.entry_pages(start, end) for e in page]

    def inclusion_proof(self, index: int, size: int) -> list[bytes]:
        return tiles.inclusion_proof(index, size, self.fetch)

    def consistency_proof(self, size1: int, size2: int) -> list[bytes]:
        return tiles.consistency_proof(size1, size2, self.fetch)

    def key_index(self, key_id: str) -> int:
        """The first entry registering ``key_id``, found by reading bundles from the start (tiles have
        no index by key; the caller proves the entry's inclusion and that it registers the key)."""
        if self.size is None:
            self.checkpoint()
        for page in self.entry_pages(0, self.size or 0):
            for index, leaf in page:
                try:
                    facts = audit.parse_leaf(leaf).statement.facts
                except InvalidInput:
                    continue
                if facts.introduces_key is not None and facts.subject == key_id:
                    return index
        raise NotFound(f"no entry of {self.source} registers {key_id}")

    # --- the whole tree ------------------------------------------------------------------------------

    def verify(self, cp: Checkpoint, *, entries: bool = True, save: Path | None = None) -> TreeReport:
        """Rebuild the tree of the verified ``cp`` from its tiles alone and check its root; with
        ``entries``, check every bundle's leaves hash to the level-0 tile. With ``save``, write every
        resource checked there (a static mirror; call after the checkpoint is verified)."""
        before = self.fetched
        written: list[tuple[Tile, bytes]] = []

        def upper(tile: Tile) -> list[bytes]:
            hashes = self.hashes(tile)
            if save is not None:
                written.append((tile, self.tile(tile)))
            return hashes

        check = tiles.TreeCheck(cp.size, upper)
        checked = 0
        from_api: list[int] = []
        for tile in tiles.tiles_for_size(cp.size, 0):
            hashes = self.hashes(tile)
            check.feed(hashes)
            if save is not None:
                written.append((tile, self.tile(tile)))
            if entries:
                bundle = Tile(None, tile.index, tile.width)
                data: bytes | None = None
                try:
                    data = self.tile(bundle)
                except BundleTooLarge:
                    leaves = self._from_api(bundle)
                    from_api.append(bundle.index)
                else:
                    leaves = tiles.decode_bundle(bundle, data)
                check_bundle(bundle, leaves, hashes)
                checked += tile.width
                if save is not None and data is not None:  # (a bundle tiles cannot carry is not mirrored)
                    written.append((bundle, data))
        check.finish(cp.root)
        if save is not None:
            for tile, data in written:
                _write(save / tile.path(), data)
        return TreeReport(cp.size, self.fetched - before, checked, tuple(from_api))


def check_bundle(bundle: Tile, leaves: list[bytes], leaf_hashes: list[bytes]) -> None:
    """Raise :class:`ProofError` unless every leaf of ``bundle`` hashes to its level-0 tile's hash."""
    for i, (leaf, h) in enumerate(zip(leaves, leaf_hashes, strict=True)):
        if merkle.leaf_hash(leaf) != h:
            raise ProofError(
                f"{bundle.path()}: entry {tiles.WIDTH * bundle.index + i} does not hash to its level-0 tile"
            )


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def _too_large(response: httpx.Response) -> bool:
    """Whether a 404 is the problem a trustscore server answers for a bundle it cannot encode."""
    if response.headers.get("content-type", "").split(";")[0].strip().lower() != "application/problem+json":
        return False
    body = b""
    for chunk in response.iter_bytes():
        body += chunk
        if len(body) > MAX_PROBLEM:
            return False
    try:
        problem = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return False
    return isinstance(problem, dict) and str(problem.get("type", "")).endswith(TOO_LARGE)
