"""The pages in a real headless Chromium against a real server with real data (issue #14).

Each page renders (with and without JavaScript), the leaderboard links to profiles, the history chart has
one point per logged snapshot, the in-page verifier accepts a real entry and rejects a tampered entry,
a tampered proof and a foreign key, and axe-core finds no serious or critical accessibility violation.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.pages.conftest import Site
from trustscore.ledger import keys, note

pytestmark = pytest.mark.browser
AXE = Path(__file__).parent / "vendor" / "axe.min.js"


@pytest.fixture
def page(chromium: Any) -> Iterator[Any]:
    context = chromium.new_context(viewport={"width": 1100, "height": 900})
    yield context.new_page()
    context.close()


def pages_of(site: Site) -> dict[str, str]:
    return {
        "home": "/",
        "leaderboard": "/leaderboard",
        "agent": f"/agents/{site.rated}",
        "agent-no-medal-rules": f"/agents/{site.rated}?model=baseline-v0.3",
        "log": "/log",
        "entry": f"/log/entries/{site.report_index}",
        "methodology": "/methodology",
    }


def test_every_page_renders_with_real_data_without_javascript(site: Site, chromium: Any) -> None:
    context = chromium.new_context(java_script_enabled=False)
    page = context.new_page()
    try:
        seen = {}
        for name, path in pages_of(site).items():
            response = page.goto(site.url + path)
            assert response is not None and response.status == 200, (path, response)
            assert "text/html" in response.headers["content-type"]
            seen[name] = page.inner_text("main")
        rating = httpx.get(f"{site.url}/v1/agents/{site.rated}/rating").json()
        assert "good-agent" in seen["home"] and "Size" in seen["home"]
        assert "good-agent" in seen["leaderboard"] and "fresh-agent" in seen["leaderboard"]
        assert str(rating["total"]) in seen["agent"] and rating["grade"] in seen["agent"]
        assert "unknown" in seen["agent"]  # an integrity exam leaves most dimensions without evidence
        assert f"Log entry {site.report_index}" in seen["entry"] and "graded" in seen["entry"]
        assert "trustscore-v2" in seen["methodology"]
        # Without JavaScript the verify button stays hidden and the CLI command is shown instead.
        page.goto(site.url + pages_of(site)["entry"])
        assert not page.is_visible("#verify-button")
        assert "trustscore log verify" in page.inner_text("#verifier")
    finally:
        context.close()


def test_a_missing_dimension_is_unknown_never_a_low_bar(site: Site, page: Any) -> None:
    page.goto(f"{site.url}/agents/{site.rated}")
    rating = httpx.get(f"{site.url}/v1/agents/{site.rated}/rating").json()
    rows = page.locator("table.dims tbody tr")
    nulls = [d for d, v in rating["dimensions"].items() if v["score"] is None]
    assert nulls, "the seed leaves some dimensions without evidence"
    for i in range(rows.count()):
        row = rows.nth(i)
        name = row.locator("th").inner_text()
        if name in nulls:
            assert "unknown" in row.inner_text()
            assert row.locator(".bar.none").count() == 1 and row.locator(".fill").count() == 0
        else:
            assert row.locator(".fill").count() == 1


def test_leaderboard_links_to_profiles(site: Site, page: Any) -> None:
    page.goto(site.url + "/leaderboard")
    page.click(f"table.board a[href='/agents/{site.rated}']")
    page.wait_for_url(f"**/agents/{site.rated}")
    assert "good-agent" in page.inner_text("h1")
    page.goto(site.url + "/leaderboard")  # the unranked agent links to its profile too
    page.click(f"a[href='/agents/{site.fresh}']")
    page.wait_for_url(f"**/agents/{site.fresh}")
    assert "fresh-agent" in page.inner_text("h1")


def test_medals_are_shown_as_words_on_the_profile_leaderboard_and_badge(site: Site, page: Any) -> None:
    rating = httpx.get(f"{site.url}/v1/agents/{site.rated}/rating").json()
    held = {d: e["medal"] for d, e in rating["medals"]["dimensions"].items() if e["medal"]}
    assert set(held) == {"capability"}, rating["medals"]  # the seed's capability sitting earns one
    page.goto(f"{site.url}/agents/{site.rated}")
    medals = page.locator("section[aria-labelledby='medals-h']")
    row = medals.locator("tr", has=page.locator("th", has_text="capability"))
    assert row.locator(".medal").inner_text() == held["capability"]  # the word itself is on the page
    # The integrity exam is a public file: scored, never counted towards a medal.
    integrity = medals.locator("tr", has_text="integrity").inner_text()
    assert "no medal: 0 real evidence items, 3 needed" in integrity and "public exam file" in integrity
    assert (
        "no medal: no score in this dimension yet" in medals.locator("tr", has_text="security").inner_text()
    )
    # The pill is a visible word, not a colour: its text is rendered and large enough to read.
    box = row.locator(".medal").bounding_box()
    assert box is not None and box["width"] > 20 and box["height"] > 10
    page.goto(f"{site.url}/agents/{site.rated}?model=baseline-v0.3")
    assert "Medals are not defined for this model" in page.inner_text("section[aria-labelledby='medals-h']")
    page.goto(f"{site.url}/leaderboard")
    board_row = page.locator("table.board tbody tr", has=page.locator(f"a[href='/agents/{site.rated}']"))
    assert board_row.locator(".medal").inner_text() == f"capability {held['capability']}"
    page.goto(f"{site.url}/v1/agents/{site.rated}/badge.svg?dimension=capability")
    label = page.locator("svg").get_attribute("aria-label") or ""
    assert label.endswith(f"\u00b7 {held['capability']}"), label


def test_history_chart_has_one_point_per_snapshot(site: Site, page: Any) -> None:
    page.goto(f"{site.url}/agents/{site.rated}")
    drawn = [
        int(i)
        for i in page.locator("svg.chart circle.point").evaluate_all("els => els.map(e => e.dataset.index)")
    ]
    assert len(drawn) >= 3
    # Snapshots keep coming every second: compare with the log up to the newest one the page drew.
    r = httpx.get(
        f"{site.url}/v1/agents/{site.rated}/rating/history", params={"to": max(drawn) + 1, "limit": 1000}
    )
    assert drawn == [p["index"] for p in r.json()["points"]]
    assert (page.locator("svg.chart title").first.text_content() or "").startswith(
        "Rating history of good-agent"
    )


def verify(page: Any) -> tuple[str, str]:
    page.click("#verify-button")
    page.wait_for_selector("#verify-result[data-outcome=verified], #verify-result[data-outcome=failed]")
    result = page.locator("#verify-result")
    return result.get_attribute("data-outcome"), result.inner_text()


def test_in_page_verification_succeeds_for_a_real_entry(site: Site, page: Any) -> None:
    page.goto(f"{site.url}/log/entries/{site.report_index}")
    outcome, text = verify(page)
    assert outcome == "verified", text
    assert f"entry {site.report_index} is in the tree" in text


def _tamper(page: Any, pattern: str, change: Any) -> None:
    def handle(route: Any) -> None:
        response = route.fetch()
        body = change(response.json())
        route.fulfill(response=response, body=json.dumps(body))

    page.route(pattern, handle)


def _flip(b64: str) -> str:
    raw = bytearray(base64.b64decode(b64))
    raw[len(raw) // 2] ^= 0x01
    return base64.b64encode(bytes(raw)).decode()


def test_in_page_verification_fails_for_a_tampered_entry(site: Site, page: Any) -> None:
    def change(body: dict[str, Any]) -> dict[str, Any]:
        for e in body["entries"]:  # the server lies about the bytes; its leaf_hash is left as it was
            e["leaf"] = _flip(e["leaf"])
        return body

    _tamper(page, "**/v1/log/entries?*", change)
    page.goto(f"{site.url}/log/entries/{site.report_index}")
    outcome, text = verify(page)
    assert outcome == "failed" and "do not lead to the signed root" in text, text


def test_in_page_verification_fails_for_a_tampered_proof(site: Site, page: Any) -> None:
    def change(body: dict[str, Any]) -> dict[str, Any]:
        body["proof"][0] = _flip(body["proof"][0])
        return body

    _tamper(page, "**/v1/log/proof/inclusion?*", change)
    page.goto(f"{site.url}/log/entries/{site.report_index}")
    outcome, text = verify(page)
    assert outcome == "failed", text


def test_in_page_verification_fails_for_a_checkpoint_not_signed_by_the_trusted_key(
    site: Site, page: Any
) -> None:
    name = httpx.get(site.url + "/v1/log/key").text.strip().split("+")[0]
    other = note.make_verifier_key(name, keys.SigningKey.generate().public_key)  # same name, another key
    page.goto(f"{site.url}/log/entries/{site.report_index}")
    page.fill("#vkey", other)
    outcome, text = verify(page)
    assert outcome == "failed" and "no signature by" in text, text


def test_in_page_verification_fails_for_a_forged_checkpoint_signature(site: Site, page: Any) -> None:
    def forge(route: Any) -> None:
        response = route.fetch()
        text = response.text()
        head, sig = text.rsplit(" ", 1)
        raw = bytearray(base64.b64decode(sig))
        raw[-1] ^= 0x01  # keep the key hash, break the Ed25519 signature
        route.fulfill(response=response, body=head + " " + base64.b64encode(bytes(raw)).decode() + "\n")

    page.route("**/v1/log/checkpoint", forge)
    page.goto(f"{site.url}/log/entries/{site.report_index}")
    outcome, text = verify(page)
    assert outcome == "failed" and "does not verify" in text, text


def test_axe_finds_no_serious_accessibility_violation(site: Site, chromium: Any) -> None:
    # The pages' Content-Security-Policy refuses injected scripts; axe is the test's own, so let it in.
    context = chromium.new_context(viewport={"width": 1100, "height": 900}, bypass_csp=True)
    page = context.new_page()
    found = {}
    for name, path in pages_of(site).items():
        page.goto(site.url + path)
        page.add_script_tag(path=str(AXE))
        result = page.evaluate("async () => await axe.run(document)")
        bad = [
            f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']][:3]}"
            for v in result["violations"]
            if v["impact"] in ("serious", "critical")
        ]
        assert result["passes"], name  # axe really ran
        if bad:
            found[name] = bad
    context.close()
    assert not found, found


def test_the_content_security_policy_stops_an_injected_inline_script(site: Site, page: Any) -> None:
    page.goto(f"{site.url}/agents/{site.rated}")
    page.evaluate(
        "() => { const s = document.createElement('script'); s.textContent = 'window.pwned = 1';"
        " document.body.appendChild(s); }"
    )
    assert page.evaluate("() => window.pwned") is None
