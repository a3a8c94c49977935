"""Absolute links name the service's public URL, not whatever Host a request names. They followed Host, in
responses a shared cache keeps for everyone: a cache that leaves the client's Host out of its key (nginx's
default with ``proxy_set_header Host $host``) would serve one attacker's links to every reader (found by
fuzzing). With TRUSTSCORE_PUBLIC_URL set they name it; without, they follow Host and say Vary: Host."""

from __future__ import annotations

from dataclasses import replace

import msgspec
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from tests.helpers import new_card
from trustscore.api.app import create_app
from trustscore.errors import ConfigError
from trustscore.settings import Settings

Client = AsyncTestClient[Litestar]
EVIL = {"host": "evil.example"}


async def registered(client: Client) -> str:
    key, card = new_card("linked")
    assert (await client.post("/v1/log/entries", content=msgspec.json.encode(card))).status_code == 201
    return key.id


def reads(agent: str) -> list[str]:
    return ["/.well-known/agent-card.json", f"/agents/{agent}", "/feed.atom", f"/agents/{agent}/feed.atom"]


async def test_with_a_public_url_links_name_it_whatever_host_says(settings: Settings, dsn: str) -> None:
    public = replace(settings, public_url="https://bureau.example/ts/")
    async with AsyncTestClient(app=create_app(public, dsn)) as client:
        agent = await registered(client)
        for path in reads(agent):
            r = await client.get(path, headers=EVIL)
            assert r.status_code == 200, (path, r.text[:200])
            assert "evil.example" not in r.text, path
            assert "https://bureau.example/ts/" in r.text, path
            assert "https://bureau.example/ts//" not in r.text, path
            assert "host" not in r.headers.get("vary", "").lower(), path


async def test_without_one_links_follow_host_and_say_so(client: Client) -> None:
    agent = await registered(client)
    for path in reads(agent):
        r = await client.get(path, headers=EVIL)
        assert r.status_code == 200, (path, r.text[:200])
        assert "http://evil.example/" in r.text, path
        assert "Host" in r.headers["vary"], path


@pytest.mark.parametrize(
    "url",
    [
        "bureau.example",
        "ftp://bureau.example",
        "https://bureau.example/a b",
        "https://user@bureau.example",
        "",
        # (review) each made broken links
        "https://x.example/?a=1",
        "https://x.example/#frag",
        "https://x.example/ts?",
        "https://x.example:99999",
        "https://x.example:0",
        "https://[::1",
        "http://...",
        "https://-",
        "https://[::1]x",
        "https://x.example:",
        'https://x.example/"<>',
    ],
)
def test_a_public_url_that_is_no_http_url_is_refused(settings: Settings, url: str) -> None:
    if not url:  # empty is unset: the default
        assert settings.with_overrides(public_url=None).public_url is None
        return
    with pytest.raises(ConfigError, match="public_url"):
        settings.with_overrides(public_url=url)
