"""Medals in plain words for the pages: why a dimension holds no medal, and the thresholds of each.

Pure: a dimension's medal entry and the rules file in, text out. A reason the pages do not know yet is
shown as itself (underscores as spaces), never hidden. The rules are in docs/methodology.md ("Medals").
"""

from __future__ import annotations

from trustscore.scoring.medals import BELOW, MEDALS, NO_SCORE, STALE, TOO_FEW, DimensionMedal, MedalsFile


def why_none(entry: DimensionMedal, rules: MedalsFile, dimension: str) -> str:
    """Why ``entry`` (of ``dimension``) holds no medal, in a sentence; empty when it holds one."""
    if entry.medal is not None:
        return ""
    if entry.reason == NO_SCORE:
        return "no score in this dimension yet (unknown, not low)"
    if entry.reason == TOO_FEW:
        return (
            f"{entry.real_n} real evidence item{'' if entry.real_n == 1 else 's'}, "
            f"{rules.min_real_items} needed ({_unreal(rules)} items do not count)"
        )
    if entry.reason == STALE:
        fresh = "none" if entry.freshness is None else f"{entry.freshness:.2f}"
        return (
            f"the newest real evidence is too old (freshness {fresh}, at least {rules.min_freshness:g} "
            f"needed; it halves every {rules.half_life_days:g} days)"
        )
    if entry.reason == BELOW:
        bronze = rules.thresholds[dimension].bronze
        return f"the score is below bronze ({bronze:g})"
    return (entry.reason or "no reason given").replace("_", " ")


#: How a page names the items of an unreal source.
_SOURCE_WORDS = {"simulation": "simulated", "real-benchmark": "public exam file"}


def _unreal(rules: MedalsFile) -> str:
    """The kinds of item that never count towards a medal under ``rules``, as a phrase."""
    kinds = [_SOURCE_WORDS.get(s, s) for s in rules.unreal_sources]
    kinds += ["pooled (reporters without standing)"] if rules.unreal_issuers else []
    kinds.append("failed re-verification")
    return " and ".join(kinds) if len(kinds) < 3 else ", ".join(kinds[:-1]) + " and " + kinds[-1]


def thresholds(rules: MedalsFile, dimension: str) -> str:
    """The lowest score of each medal of ``dimension``, lowest first: ``bronze 60 · silver 75 · gold 88``."""
    t = rules.thresholds[dimension]
    return " \u00b7 ".join(f"{m} {getattr(t, m):g}" for m in reversed(MEDALS))
