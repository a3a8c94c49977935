"""The signed, append-only evidence log: keys, DSSE envelopes, statement kinds, Merkle math, checkpoints.

Everything in this package is pure (no database, no HTTP). See docs/ledger-format.md.
"""
