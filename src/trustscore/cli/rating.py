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
import re
from pathlib import Path
from typing import Any

from trustscore import resources
from trustscore.attestations import rating as attestation
from trustscore.cli import common
from trustscore.cli.common import verifier
from trustscore.errors import InvalidInput
from trustscore.scoring.weights import Weights, load_weights

WEIGHTS_DIR = resources.path("weights")
_MODEL = re.compile(r"[a-z][a-z0-9._-]*", re.ASCII)


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser("rating", help="verify rating attestations offline")
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
    c = rsub.add_parser("verify-vc", help="verify a rating credential's eddsa-jcs-2022 proof")
    c.add_argument("credential", type=Path, help="the JSON of ...?format=vc")
    c.set_defaults(func=run_verify_vc)


def _read(path: Path) -> bytes:
    return common.read_bytes(path)


def weights_for(path: Path | None, model: str) -> Weights:
    """The weights file at ``path``, else the published file of ``model`` (a model version name)."""
    if path is not None:
        return load_weights(path)
    if not _MODEL.fullmatch(model):
        raise InvalidInput(f"weights_model {model!r} is not a model version")
    return load_weights(WEIGHTS_DIR / f"{model}.toml")


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
        {
            "verified": True,
            "agent": a.agent,
            "model_version": a.model_version,
            "computed_at": a.computed_at,
            "signer": verified.signer,
            "checkpoint_size": verified.checkpoint.size,
            "entries_proven": len(a.evidence_entries),
            "total": a.total,
            "grade": a.grade,
            "n": a.n,
            "log_key_pinned": trusted is not None,
        },
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
