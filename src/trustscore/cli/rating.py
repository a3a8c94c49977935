"""``trustscore rating verify``: check a rating attestation bundle offline; ``verify-vc``: check a credential.

A bundle is checked trusting only the log's verifier key: the checkpoint's signature, every entry's
inclusion proof, every entry's signatures and admission, the attestation's signature by a registered
service key, and that recomputing the rating from the bundled evidence with the attested weights file
gives every attested number (docs/attestations.md). The first problem found is printed as one line and
the exit status is non-zero.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from trustscore.attestations import rating as attestation
from trustscore.cli import common
from trustscore.cli.common import verifier
from trustscore.cli.table import Column, render
from trustscore.client import LogClient
from trustscore.errors import InvalidInput
from trustscore.scoring.weights import Weights, load_published, load_weights


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "rating", help="read a rating; verify rating attestations offline"
    )
    rsub = p.add_subparsers(dest="rating_command", required=True, metavar="SUBCOMMAND")
    v = rsub.add_parser("verify", help="verify an attestation bundle and recompute the rating")
    v.add_argument(
        "bundle", type=Path, help="the JSON of GET /v1/agents/{id}/rating/attestation (- for stdin)"
    )
    v.add_argument("--weights", type=Path, help="weights file (default: weights/<model_version>.toml)")
    v.add_argument(
        "--verifier-key", help="the log's verifier key, or a file holding it (default: the bundle's own)"
    )
    common.add_json(v)
    v.set_defaults(func=run_verify)
    s = rsub.add_parser("show", help="an agent's rating from a server: total, interval, dimensions, medals")
    s.add_argument("agent", help="the agent's id (ts1_...)")
    s.add_argument("--server", required=True, help="trustscore server URL")
    s.add_argument("--model", help="model version (default: the server's default model)")
    common.add_json(s)
    s.set_defaults(func=run_show)
    c = rsub.add_parser("verify-vc", help="verify a rating credential's eddsa-jcs-2022 proof")
    c.add_argument("credential", type=Path, help="the JSON of ...?format=vc")
    c.set_defaults(func=run_verify_vc)


def _read(path: Path) -> bytes:
    return common.read_bytes(path)


def weights_for(path: Path | None, model: str) -> Weights:
    """The weights file at ``path``, else the published file of ``model`` (a model version name)."""
    return load_weights(path) if path is not None else load_published(model)


def run_verify(args: argparse.Namespace) -> int:
    bundle = attestation.decode_bundle(_read(args.bundle))
    trusted = None if args.verifier_key is None else verifier(args.verifier_key)
    verified = attestation.verify_bundle(bundle, weights_for(args.weights, bundle.weights_model), trusted)
    a = verified.attestation
    note = (
        f"note: trusted the log key the bundle names ({bundle.log_verifier_key}); pin it with --verifier-key"
    )
    common.emit(
        args,
        {**verified.summary(), "log_key_pinned": trusted is not None},
        [
            *([note] if trusted is None else []),
            f"verified: {a.agent} under {a.model_version} at {a.computed_at}, signed by {verified.signer}",
            f"checkpoint {verified.checkpoint.size} of {verified.checkpoint.origin}; "
            f"{len(a.evidence_entries)} entries proven; rating recomputed: total {a.total}, grade {a.grade}, "
            f"n {a.n}",
        ],
    )
    return 0


def run_verify_vc(args: argparse.Namespace) -> int:
    try:
        credential = json.loads(_read(args.credential))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"{args.credential} is not JSON") from exc
    if not isinstance(credential, dict):
        raise InvalidInput(f"{args.credential} is not a credential object")
    document = attestation.verify_rating_credential(credential)
    subject = document["credentialSubject"]
    print(f"verified: {document['issuer']} attests {subject['id']} (total {subject.get('total')})")
    return 0


def _interval(pair: list[float] | None) -> str | None:
    return None if pair is None else f"{pair[0]:.1f}..{pair[1]:.1f}"


def rating_lines(r: dict[str, Any]) -> list[str]:
    """A rating response as text: the headline, then one row per dimension with its n, interval, medal
    and why a number or a medal is missing (a missing score is unknown, shown as ``-``, never 0)."""
    total = "-" if r["total"] is None else str(r["total"])
    interval = r.get("total_interval")
    headline = f"total {total}" + ("" if interval is None else f" (interval {interval[0]}..{interval[1]})")
    medals = r.get("medals") or {}
    rows = []
    for name, d in r["dimensions"].items():
        m = (medals.get("dimensions") or {}).get(name) if medals else None
        note = d.get("null_reason") or (None if m is None or m["medal"] else m["reason"])
        rows.append([name, d["score"], _interval(d.get("interval")), d.get("n"), m and m["medal"], note])
    lines = [
        f"agent {r['agent']} under {r['model_version']} at {r['computed_at']} (log size {r['log_size']})",
        f"{headline}  grade {r['grade'] or '-'}  n {r['n']}  coverage {r['coverage']:g}",
        *render(
            ["DIMENSION", Column("SCORE", right=True), "INTERVAL", Column("N", right=True), "MEDAL", "NOTE"],
            rows,
        ),
    ]
    if not medals:
        lines.append(f"medals: none defined for {r['model_version']}")
    lines += [
        f"null: {path} ({why})"
        for path, why in r["null_reasons"].items()
        if not path.startswith("dimensions.")
    ]
    return lines


def run_show(args: argparse.Namespace) -> int:
    agent = common.agent_id(args.agent)
    with LogClient(args.server) as client:
        rating = client.get_json(f"/v1/agents/{agent}/rating", {"model": args.model})
    common.emit(args, rating, rating_lines(rating))
    return 0
