"""The log as C2SP tlog-tiles over HTTP: tiles equal the stored tree, proofs from tiles equal the API's,
a full tile never changes once served, and bad paths are problems."""

from __future__ import annotations

import base64
from dataclasses import replace

import msgspec
from litestar import Litestar
from litestar.testing import AsyncTestClient

from tests.helpers import new_card
from tests.integration.api.test_log_api import wait_for_size
from trustscore.ledger import merkle, tiles
from trustscore.ledger.submission import check, prepare
from trustscore.ledger.tiles import Tile
from trustscore.store import db
from trustscore.store.log import LogStore

Client = AsyncTestClient[Litestar]
IMMUTABLE = "public, max-age=31536000, immutable"


async def append_cards(client: Client, n: int) -> int:
    """Append ``n`` fresh agent cards in one batch; the size of the log after them."""
    envs = [new_card(f"tiles-{i}")[1] for i in range(n)]
    r = await client.post("/v1/log/entries", content=msgspec.json.encode(envs))
    assert r.status_code == 201, r.text
    return int(r.json()["entries"][-1]["index"]) + 1


async def get_tile(client: Client, tile: Tile) -> bytes:
    r = await client.get("/" + tile.path())
    assert r.status_code == 200, (tile.path(), r.text)
    assert r.headers["content-type"] == "application/octet-stream"
    assert r.headers["cache-control"] == (IMMUTABLE if tile.full else "public, max-age=60")
    return r.content


async def test_tiles_rebuild_the_tree_and_give_the_apis_proofs(client: Client) -> None:
    size = await append_cards(client, 300)
    cp = await wait_for_size(client, size)
    size = cp.size
    r = await client.get("/checkpoint")
    assert r.status_code == 200 and r.text == (await client.get("/v1/log/checkpoint")).text
    assert r.headers["content-type"].startswith("text/plain")

    # Every tile of the tree, fetched over HTTP, and nothing else: the whole tree from tiles alone.
    fetched = {t: await get_tile(client, t) for t in tiles.all_tiles(size)}
    check = tiles.TreeCheck(size, lambda t: tiles.decode_hashes(t, fetched[t]))
    leaves: list[bytes] = []
    for t in tiles.tiles_for_size(size, 0):
        hashes = tiles.decode_hashes(t, fetched[t])
        check.feed(hashes)
        bundle = tiles.decode_bundle(
            Tile(None, t.index, t.width), await get_tile(client, Tile(None, t.index, t.width))
        )
        assert [merkle.leaf_hash(leaf) for leaf in bundle] == hashes
        leaves += bundle
    assert check.finish(cp.root) == cp.root
    served = (await client.get("/v1/log/entries", params={"start": 0, "end": size})).json()["entries"]
    assert [base64.b64decode(e["leaf"]) for e in served] == leaves

    def fetch(wanted: object) -> dict[Tile, bytes]:
        return {t: fetched[t] for t in wanted}  # type: ignore[attr-defined]

    for index in (0, 1, 255, 256, size - 1):
        api = (await client.get("/v1/log/proof/inclusion", params={"index": index, "size": size})).json()
        assert [base64.b64encode(h).decode() for h in tiles.inclusion_proof(index, size, fetch)] == api[
            "proof"
        ]
    for old in (1, 200, 256, size - 1):
        api = (await client.get("/v1/log/proof/consistency", params={"from": old, "to": size})).json()
        assert [base64.b64encode(h).decode() for h in tiles.consistency_proof(old, size, fetch)] == api[
            "proof"
        ]


async def test_a_full_tile_never_changes(client: Client) -> None:
    size = await append_cards(client, 260)
    await wait_for_size(client, size)
    first = await client.get("/tile/0/000")
    bundle = await client.get("/tile/entries/000")
    assert first.status_code == 200 and len(first.content) == 256 * 32
    assert first.headers["cache-control"] == IMMUTABLE and first.headers["etag"]

    size = await append_cards(client, 300)
    cp = await wait_for_size(client, size)
    again = await client.get("/tile/0/000")
    assert again.content == first.content and again.headers["etag"] == first.headers["etag"]
    assert again.headers["cache-control"] == IMMUTABLE
    assert (await client.get("/tile/entries/000")).content == bundle.content
    # Bundles are gzipped for clients that accept it (each representation its own ETag), not otherwise.
    plain = await client.get("/tile/entries/000", headers={"Accept-Encoding": "identity"})
    zipped = await client.get("/tile/entries/000", headers={"Accept-Encoding": "gzip"})
    assert "content-encoding" not in plain.headers and zipped.headers["content-encoding"] == "gzip"
    assert plain.content == zipped.content == bundle.content  # httpx decodes the gzipped body
    assert plain.headers["etag"] != zipped.headers["etag"] and zipped.headers["vary"] == "Accept-Encoding"
    assert int(zipped.headers["content-length"]) < len(plain.content)
    etag = again.headers["etag"]
    revalidated = await client.get("/tile/0/000", headers={"If-None-Match": etag})
    assert (
        revalidated.status_code == 304 and revalidated.content == b"" and revalidated.headers["etag"] == etag
    )
    # The partial tile at the old width is the prefix of today's tile: it too never changes.
    old_partial = Tile(0, 1, (size - 300) - 256)
    newer = await get_tile(client, tiles.tile_at(0, 1, cp.size))
    assert (await get_tile(client, old_partial)) == newer[: old_partial.width * 32]


async def test_tiles_beyond_the_checkpoint_and_bad_paths(client: Client) -> None:
    size = await append_cards(client, 3)
    cp = await wait_for_size(client, size)
    assert (await client.get(f"/tile/0/000.p/{cp.size}")).status_code == 200
    for beyond in ("/tile/0/000", f"/tile/0/000.p/{cp.size + 1}", "/tile/0/001.p/1", "/tile/1/000.p/1",
                   "/tile/entries/000", "/tile/entries/x001/000.p/1",
                   # well-formed, but beyond any log (indexes are bigints): a 404, not a 500
                   "/tile/0/x999/x999/x999/x999/x999/x999/x999/x999/999",
                   "/tile/7/001", "/tile/63/x999/x999/x999/x999/x999/999.p/255",
                   "/tile/entries/x999/x999/x999/x999/x999/x999/x999/x999/999"):  # fmt: skip
        r = await client.get(beyond)
        assert r.status_code == 404, (beyond, r.text)
        assert r.headers["content-type"] == "application/problem+json"
    for bad in ("/tile/0/0", "/tile/64/000", "/tile/0/000.p/0", "/tile/0/000.p/256", "/tile/x/000",
                "/tile/0/x000/001", "/tile/0/000.p/01", "/tile/entries/000.p"):  # fmt: skip
        r = await client.get(bad)
        assert r.status_code == 400, (bad, r.text)
        assert r.headers["content-type"] == "application/problem+json"
        assert "tile path" in r.json()["detail"]


async def test_a_tile_is_served_under_its_one_path_only(client: Client) -> None:
    """The router merged repeated slashes, dropped a trailing one and decoded escapes before the tile
    route read its path, so one full tile was served, immutable, under many names (found by fuzzing)."""
    size = await append_cards(client, 260)
    await wait_for_size(client, size)
    assert (await client.get("/tile/0/000")).status_code == 200
    assert (await client.get("/tile/0/000?v=1")).status_code == 200  # a query string is not the path
    for other in ("/tile/0//000", "/tile//0/000", "/tile/0/000/", "/tile/0/%30%30%30", "/tile/entries//000",
                  "/tile/%30/000", "/tile/0/000%2F"):  # fmt: skip
        r = await client.get(other)
        assert r.status_code == 400, (other, r.status_code)
        assert "one form (/tile/" in r.json()["detail"] or "tile path" in r.json()["detail"], r.text


async def test_an_entry_too_large_for_a_bundle_is_a_problem_naming_it(client: Client, dsn: str) -> None:
    """tlog-tiles bundles carry uint16 lengths; an entry of more bytes cannot be put in one."""
    size = await append_cards(client, 1)
    await wait_for_size(client, size)
    _, env = new_card("big")
    entry = check(prepare(msgspec.json.decode(msgspec.json.encode(env))), lambda _: None)
    big = b"x" * (tiles.MAX_ENTRY + 1)  # the store takes what it is given: stand in for a huge report
    entry = replace(entry, leaf=big, leaf_hash=merkle.leaf_hash(big))
    pool = await db.create_pool(dsn, min_size=1, max_size=1)
    try:
        [appended] = await LogStore(pool).append([entry])
    finally:
        await pool.close()
    cp = await wait_for_size(client, appended.index + 1)
    r = await client.get(f"/tile/entries/000.p/{cp.size}")
    assert r.status_code == 404 and r.headers["content-type"] == "application/problem+json"
    problem = r.json()
    assert problem["type"].endswith("/entry-too-large-for-tiles")
    assert f"entry {appended.index} is {tiles.MAX_ENTRY + 1} bytes" in problem["detail"]
    assert f"/v1/log/entries?start={appended.index}" in problem["detail"]
    hashes = tiles.decode_hashes(Tile(0, 0, cp.size), await get_tile(client, Tile(0, 0, cp.size)))
    assert hashes[appended.index] == merkle.leaf_hash(big)  # hash tiles and proofs are unaffected
