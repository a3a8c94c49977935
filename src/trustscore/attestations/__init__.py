"""Rating attestations: signed ratings and the bundles that let anyone re-check them offline.

Above scoring and evidence derivation (an attestation's numbers are recomputed from the bundled log
entries), below the store and services that serve them (docs/architecture.md).
"""
