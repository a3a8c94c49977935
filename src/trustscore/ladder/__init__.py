"""The evidence ladder (docs/evidence-ladder.md): work records' rungs, every evidence item's rung, and
outcome rates with their sample size. ``rule`` is pure and sits below evidence derivation; ``rows`` and
``stats`` read derived evidence and sit above it."""
