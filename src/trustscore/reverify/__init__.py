"""Server re-verification: the server asks an agent's declared endpoint a sample of items again.

Pure cores: :mod:`sampling` (seed and sample anyone can recompute), :mod:`compare` (tolerances),
:mod:`security` (upgrade-only security status), :mod:`status` (verified status and history),
:mod:`mapping` (admission rule and evidence). I/O at the edges: :mod:`runner` (asks the endpoint through
:mod:`trustscore.sdk.outbound`) and :mod:`cli` (``trustscore reverify check``). See docs/reverification.md.

This package's ``__init__`` imports nothing, so the ledger kind can import the pure modules without cycles.
"""
