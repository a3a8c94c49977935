"""Re-verification policy, pure: what a run's evidence is and where an agent stands after its runs.

:mod:`status` (verified status, security streak and history), :mod:`evidence` (the evidence a logged
run becomes), :mod:`fresh` (fresh items beside the drawn ones), :mod:`recheck` (recompute a run's seed and
samples from the log). The protocol rules the statement itself must satisfy (seed, sample, tolerances,
security steps) are part of the kind, in ``kinds/reverification/``. The network runner is in
``outbound/reverify_runner.py`` and ``trustscore reverify check`` in ``cli/reverify.py``. See
docs/reverification.md and docs/architecture.md.
"""
