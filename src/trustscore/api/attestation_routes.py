"""Signed rating attestations: a bundle for ``trustscore rating verify``, or a W3C Verifiable Credential."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from litestar import Controller, Request, get
from litestar.di import NamedDependency
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import FromPath, QueryParameter
from litestar.response.base import ASGIResponse

from trustscore.api.addresses import client_address
from trustscore.api.log_routes import JSON_HEADERS, json_response
from trustscore.api.openapi import ATTESTATION_PROBLEMS
from trustscore.services.attestations import AttestationService


class SignatureOut(msgspec.Struct):
    keyid: str
    sig: str


class EnvelopeOut(msgspec.Struct):
    payloadType: str
    payload: str
    signatures: list[SignatureOut]


class BundleEntryOut(msgspec.Struct):
    index: int
    leaf: str
    proof: list[str]


class BundleOut(msgspec.Struct):
    attestation: EnvelopeOut
    log_verifier_key: str
    checkpoint: str
    entries: list[BundleEntryOut]
    weights_model: str


class DataIntegrityProofOut(msgspec.Struct):
    type: str
    cryptosuite: str
    created: str
    verificationMethod: str
    proofPurpose: str
    context: list[str] = msgspec.field(name="@context")
    proofValue: str


class CredentialOut(msgspec.Struct):
    context: list[str] = msgspec.field(name="@context")
    type: list[str]
    issuer: str
    validFrom: str
    credentialSubject: dict[str, Any]
    proof: DataIntegrityProofOut


Attestations = NamedDependency[AttestationService]
Model = Annotated[str | None, QueryParameter(description="model version (default trustscore-v2)")]
Format = Annotated[
    Literal["bundle", "vc"],
    QueryParameter(description="bundle: for `trustscore rating verify`; vc: a W3C VC 2.0 (eddsa-jcs-2022)"),
]


class AttestationController(Controller):
    path = "/v1"
    tags = ["public"]  # noqa: RUF012 - Litestar class attribute

    @get(
        "/agents/{agent_id:str}/rating/attestation",
        operation_id="getRatingAttestation",
        responses={
            200: ResponseSpec(
                BundleOut | CredentialOut,  # type: ignore[arg-type]
                description="a bundle (format=bundle) or a Verifiable Credential (format=vc)",
                generate_examples=False,
            ),
            **ATTESTATION_PROBLEMS,
        },
    )
    async def attestation(
        self,
        request: Request[Any, Any, Any],
        attestations: Attestations,
        agent_id: FromPath[str],
        model: Model = None,
        format: Format = "bundle",
    ) -> ASGIResponse:
        """The served rating signed by the server with the checkpoint and inclusion proofs of every entry
        it was computed from (``format=bundle``), or the same rating as a Verifiable Credential (``vc``).
        A bundle made in the last 30 s for the same agent and model is served again (it names the rating
        it attests); a rating computed from more than 20,000 entries, or a bundle of more than 32 MiB, has
        none (422); a client address starts one making at a time (429)."""
        address = client_address(request)
        if format == "vc":
            vc = await attestations.credential(agent_id, model, address)
            return json_response(msgspec.convert(vc, CredentialOut))
        return ASGIResponse(
            body=await attestations.bundle_json(agent_id, model, address), headers=JSON_HEADERS
        )
