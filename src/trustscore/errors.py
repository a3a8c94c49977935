"""The one error hierarchy of trustscore.

Every error has a stable ``code`` (a slug used as the RFC 9457 problem ``type`` suffix) and an HTTP
``status``; the API maps them to problem+json in one place and the CLI prints the message and exits
non-zero. Verification failures carry the evidence they were judged on.
"""

from __future__ import annotations

from typing import Any, ClassVar

#: What a JSON value nested beyond the decoder's depth limit is told (msgspec raises RecursionError).
TOO_DEEP = "JSON is nested too deeply"


class TrustscoreError(Exception):
    """Base of every error trustscore raises on purpose."""

    code: ClassVar[str] = "error"
    status: ClassVar[int] = 500
    title: ClassVar[str] = "Internal error"

    def __init__(self, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.message = message
        self.extra = extra


class InvalidInput(TrustscoreError):
    """Input that cannot be parsed or does not match its schema."""

    code = "invalid-input"
    status = 400
    title = "Invalid input"


class PayloadTooLarge(InvalidInput):
    code = "payload-too-large"
    status = 413
    title = "Payload too large"


class TooLarge(TrustscoreError):
    """An answer larger than the server makes (e.g. a rating attestation bundle with too many entries)."""

    code = "too-large"
    status = 422
    title = "Answer too large"


class UnsupportedKind(InvalidInput):
    """A payload type, predicate type or schema version this server does not know."""

    code = "unsupported-kind"
    status = 422
    title = "Unsupported statement kind"


class VerificationError(TrustscoreError):
    """A signature, proof or checkpoint did not verify."""

    code = "verification-failed"
    status = 422
    title = "Verification failed"


class SignatureError(VerificationError):
    code = "bad-signature"
    title = "Signature does not verify"


class UnknownSigner(VerificationError):
    code = "unknown-signer"
    title = "Signer is not registered"


class ProofError(VerificationError):
    code = "bad-proof"
    title = "Proof does not verify"


class InconsistencyError(ProofError):
    """Two checkpoints are not consistent; carries both and the proof that failed."""

    code = "inconsistent-checkpoints"
    title = "Checkpoints are inconsistent"

    def __init__(
        self, message: str, *, old: object = None, new: object = None, proof: list[bytes] | None = None
    ) -> None:
        super().__init__(message)
        self.old = old
        self.new = new
        self.proof = proof or []


class Conflict(TrustscoreError):
    code = "conflict"
    status = 409
    title = "Conflict"


class NonceReplay(Conflict):
    code = "nonce-replay"
    title = "Nonce already used"


class Forbidden(TrustscoreError):
    code = "forbidden"
    status = 403
    title = "Forbidden"


class NotFound(TrustscoreError):
    code = "not-found"
    status = 404
    title = "Not found"


class NotYetAvailable(NotFound):
    """The request names a tree size or entry beyond what is integrated so far."""

    code = "not-yet-integrated"
    title = "Not yet integrated"


class ConfigError(TrustscoreError):
    code = "config"
    status = 500
    title = "Configuration error"


class StorageError(TrustscoreError):
    code = "storage"
    status = 503
    title = "Storage unavailable"


class RateLimited(TrustscoreError):
    code = "rate-limited"
    status = 429
    title = "Too many requests"


class Busy(TrustscoreError):
    """The server cannot take this work now; the client may retry."""

    code = "busy"
    status = 503
    title = "Service busy"


class AgentUnavailable(TrustscoreError):
    """The agent under test answered none of the first exam items (unreachable, crashing): no report."""

    code = "agent-unavailable"
    status = 502
    title = "Agent unavailable"


class SandboxUnavailable(TrustscoreError):
    """The kernel refused the isolation code items need, and weak isolation was not allowed."""

    code = "sandbox-unavailable"
    status = 503
    title = "Code sandbox unavailable"
