"""Atom (RFC 4287) feeds of webhook events, built with the standard library's ElementTree.

A template-free builder: ElementTree escapes every text node, and an Atom feed of this shape needs only
eight element names, so a generator library (feedgen: lxml and dateutil, last released 2023) adds
dependencies for nothing. Each entry's content is the event's JSON body exactly as webhooks deliver it.
"""

from __future__ import annotations

import datetime as dt
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass

ATOM_NS = "http://www.w3.org/2005/Atom"
MEDIA_TYPE = "application/atom+xml; charset=utf-8"
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@dataclass(frozen=True)
class FeedEntry:
    id: str
    type: str
    agent: str
    at: dt.datetime
    body: bytes  # the event's JSON


def _iso(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def _text(parent: ET.Element, tag: str, text: str, **attrs: str) -> ET.Element:
    el = ET.SubElement(parent, f"{{{ATOM_NS}}}{tag}", attrs)
    el.text = text
    return el


def atom(feed_id: str, title: str, self_url: str, entries: Sequence[FeedEntry]) -> bytes:
    """The Atom document of ``entries`` (newest first); ``updated`` is the newest entry's time."""
    ET.register_namespace("", ATOM_NS)
    feed = ET.Element(f"{{{ATOM_NS}}}feed")
    _text(feed, "id", feed_id)
    _text(feed, "title", title)
    _text(feed, "updated", _iso(max((e.at for e in entries), default=EPOCH)))
    ET.SubElement(feed, f"{{{ATOM_NS}}}link", {"rel": "self", "href": self_url})
    author = ET.SubElement(feed, f"{{{ATOM_NS}}}author")
    _text(author, "name", "trustscore")
    for e in entries:
        entry = ET.SubElement(feed, f"{{{ATOM_NS}}}entry")
        _text(entry, "id", f"urn:trustscore:event:{e.id}")
        _text(entry, "title", f"{e.type}: {e.agent}")
        _text(entry, "updated", _iso(e.at))
        ET.SubElement(entry, f"{{{ATOM_NS}}}category", {"term": e.type})
        _text(entry, "content", e.body.decode("utf-8"), type="application/json")
    out: bytes = ET.tostring(feed, encoding="utf-8", xml_declaration=True)
    return out
