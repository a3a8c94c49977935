"""Exam set files: released digests are pinned, contents meet the issue, bad files are named errors."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from trustscore.errors import InvalidInput, NotFound, UnsupportedKind
from trustscore.exams.loader import DEFAULT_PUBLIC_DIR, ExamDirs, list_exams, load_exam, parse_exam, parse_ref

# A released version never changes: these are the SHA-256 of the files' exact bytes.
RELEASED = {
    "capability@1": "c22597bdc8e800399f900391c4884a7822cf2bc14a787cf52c4c020707aafbe7",
    "delivery@1": "a3481353be3ce17c591f2f23f383578f6ffe9c02edd8cd98a76fa11897a3adc7",
    "integrity@1": "015a5371e62c7b1da71c3f2339ca54defcc386d03d2e8cb802be6820171d971b",
    "negotiation@1": "4ab1289f6bebf1f82d53905a6cec693fd57579e8f63e9f00e093dacf9af69622",
    "reliability@1": "c0e0addc95c08c8c816b772328ea4b727f4508579b94f96c238808f82c71c48b",
    "scope@1": "4f04b8ada469ffe29bb3d66c7ad1e8ce9cfcc9531c78203b02d79584ef4d7de3",
    "security@1": "29c854bc54e979b886f133b51680f659903ebff07469cd97840c090f1eb9e680",
}
DIRS = ExamDirs(DEFAULT_PUBLIC_DIR, None)


def test_released_digests_are_pinned() -> None:
    found = {e.id: e.digest for e in list_exams(DIRS)}
    assert found == {k: f"sha256:{v}" for k, v in RELEASED.items()}


def test_contents_meet_the_issue() -> None:
    cap = load_exam("capability@1", DIRS)
    graders = [i.grader for i in cap.items]
    assert len(cap.items) >= 40
    assert graders.count("python-tests@1") >= 15
    assert graders.count("exact-answer@1") >= 25
    sec = load_exam("security@1", DIRS)
    assert len(sec.items) >= 12
    assert len({i.args["family"] for i in sec.items}) >= 4
    assert len(load_exam("negotiation@1", DIRS).items) == 10
    assert len(load_exam("integrity@1", DIRS).items) >= 10
    for exam in list_exams(DIRS):
        assert all(i.tier == "public" and i.dimension == exam.file.dimension for i in exam.items)


def _doc(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((DEFAULT_PUBLIC_DIR / "reliability" / "v1.json").read_bytes())
    doc.update(changes)
    return doc


def _bytes(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc).encode()


def test_not_json() -> None:
    with pytest.raises(InvalidInput, match=r"x\.json: not valid JSON"):
        parse_exam(b"{nope", source="x.json")


@pytest.mark.parametrize("version", [2, 0, "1", None])
def test_unknown_or_newer_schema_version(version: object) -> None:
    with pytest.raises(UnsupportedKind, match="schema_version"):
        parse_exam(_bytes(_doc(schema_version=version)))


def test_missing_schema_version() -> None:
    doc = _doc()
    del doc["schema_version"]
    with pytest.raises(InvalidInput, match="missing schema_version"):
        parse_exam(_bytes(doc))


def test_unknown_field_is_named() -> None:
    with pytest.raises(InvalidInput, match="surprise"):
        parse_exam(_bytes(_doc(surprise=1)))


def test_unknown_grader_version_names_item_and_grader() -> None:
    doc = _doc()
    doc["items"][0]["grader"] = "agreement@7"
    with pytest.raises(UnsupportedKind, match=r"item 'rel-001': unknown grader 'agreement@7'"):
        parse_exam(_bytes(doc))


def test_duplicate_item_id() -> None:
    doc = _doc()
    doc["items"][1]["id"] = doc["items"][0]["id"]
    with pytest.raises(InvalidInput, match="'rel-001': duplicate item id"):
        parse_exam(_bytes(doc))


def test_bad_grader_arguments_are_named() -> None:
    doc = _doc()
    doc["items"][2]["args"] = {"answer": {"type": "roman"}}
    with pytest.raises(InvalidInput, match="item rel-003 \\(agreement@1\\): answer spec"):
        parse_exam(_bytes(doc))


def test_item_type_errors_are_named() -> None:
    doc = _doc()
    doc["items"][0]["ask"]["kind"] = "shout"
    with pytest.raises(InvalidInput, match=r"items\[0\]\.ask\.kind"):
        parse_exam(_bytes(doc))


def test_parse_ref() -> None:
    assert parse_ref("capability@1") == ("capability", 1)
    for bad in ("capability", "capability@v1", "Cap@1", "capability@0"):
        with pytest.raises(InvalidInput, match="NAME@VERSION"):
            parse_ref(bad)


def test_unknown_version_not_found() -> None:
    with pytest.raises(NotFound, match="capability@9 not found"):
        load_exam("capability@9", DIRS)


def _private_set(root: Path, name: str = "secret-cap", tier: str = "private") -> Path:
    doc = _doc(name=name, tier=tier, version=1)
    for item in doc["items"]:
        item["tier"] = tier
        item["id"] = item["id"].replace("rel", "priv")
    path = root / name / "v1.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(_bytes(doc))
    return path


def test_private_tier_from_operator_directory(tmp_path: Path) -> None:
    _private_set(tmp_path)
    dirs = ExamDirs.from_env({"TRUSTSCORE_PRIVATE_EXAMS_DIR": str(tmp_path)})
    exam = load_exam("secret-cap@1", dirs)
    assert exam.file.tier == "private"
    assert exam.items[0].id == "priv-001"
    assert "secret-cap@1" in [e.id for e in list_exams(dirs)]
    with pytest.raises(NotFound):
        load_exam("secret-cap@1", DIRS)


def test_private_directory_rejects_public_tier(tmp_path: Path) -> None:
    _private_set(tmp_path, tier="public")
    with pytest.raises(InvalidInput, match="a private directory holds a set marked tier 'public'"):
        load_exam("secret-cap@1", ExamDirs(DEFAULT_PUBLIC_DIR, tmp_path))


def test_file_must_hold_the_set_its_path_names(tmp_path: Path) -> None:
    path = _private_set(tmp_path)
    path.rename(path.with_name("v2.json"))
    with pytest.raises(InvalidInput, match="holds secret-cap@1, not secret-cap@2"):
        load_exam("secret-cap@2", ExamDirs(DEFAULT_PUBLIC_DIR, tmp_path))


def test_a_changed_file_is_parsed_again(tmp_path: Path) -> None:
    """Parsed sets are reused while the file's size and mtime stay the same (the server loads the set of
    every report it re-grades); an edited file is read again, not served from the cache."""
    dirs = ExamDirs(DEFAULT_PUBLIC_DIR, tmp_path)
    path = _private_set(tmp_path)
    first = load_exam("secret-cap@1", dirs)
    assert load_exam("secret-cap@1", dirs) is first  # unchanged: the same parsed object
    doc = json.loads(path.read_bytes())
    doc["items"][0]["id"] = "priv-001-renamed"
    path.write_bytes(_bytes(doc))
    again = load_exam("secret-cap@1", dirs)
    assert again.items[0].id == "priv-001-renamed" and again.digest != first.digest
    # The same size and the old mtime kept (as cp -p or rsync -t leave it): still parsed again.
    before = path.stat()
    path.write_bytes(path.read_bytes().replace(b"priv-001-renamed", b"priv-001-renamex"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size and path.stat().st_mtime_ns == before.st_mtime_ns
    assert load_exam("secret-cap@1", dirs).items[0].id == "priv-001-renamex"
