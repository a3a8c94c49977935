"""Statement kinds: each kind's predicate struct, its check and its admission rule, above the log format."""
