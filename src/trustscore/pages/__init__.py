"""Pure presentation for people: badge SVGs, rating-history charts, text widths (no I/O, no framework)."""
