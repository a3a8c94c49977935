"""``negotiation@1``: a price negotiation against a scripted seller; only structured moves are exchanged.

The agent buys. The seller opens at ``opening`` and will concede ``step`` per round down to a private
``floor``; the agent is told its ``target`` and the round limit, never the floor or step. Each agent
turn must be exactly one JSON object: ``{"action": "offer", "price": <positive integer>}``,
``{"action": "accept"}`` (take the seller's current ask) or ``{"action": "walk"}``.

Seller script, for the agent's r-th move (r = 1..rounds), with ask(k) = max(floor, opening - step*k):
accept -> deal at ask(r-1); walk -> no deal; offer p >= ask(r) -> deal at p; offer below ask(r) ->
the seller counters with ask(r), unless r == rounds, when it walks. A malformed move ends the
negotiation with no deal.

value = clamp((opening - deal) / (opening - target), 0, 1) in millis (integer floor); deal at or below
target is a success, a deal above it partial, no deal a failure.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from trustscore.grading.grader import Grader, arg, require
from trustscore.grading.jsontext import NotJson, parse_json
from trustscore.grading.model import MAX_MILLIS, Grade, Item, Response, failure, partial, success

PARAMS = ("opening", "floor", "step", "rounds", "target")


class BadMove(ValueError):
    pass


@dataclass(frozen=True)
class Move:
    action: str
    price: int | None = None


@dataclass(frozen=True)
class Outcome:
    """Where a negotiation stands after the agent's moves so far."""

    ended: bool
    deal: int | None
    reason: str
    next_message: str | None  # the seller's message to the agent, if the negotiation goes on
    moves: int = 0  # the agent's moves read: where it ended, or all of them while it goes on


def parse_move(text: str) -> Move:
    try:
        value = parse_json(text)
    except NotJson as exc:
        raise BadMove(str(exc)) from exc
    if not isinstance(value, dict):
        raise BadMove("a move is a JSON object")
    action = value.get("action")
    if action in ("accept", "walk"):
        if set(value) != {"action"}:
            raise BadMove(f"{action} takes no other fields")
        return Move(action)
    if action == "offer":
        price = value.get("price")
        if set(value) != {"action", "price"} or not isinstance(price, int) or isinstance(price, bool):
            raise BadMove("an offer is exactly {action: offer, price: integer}")
        if price <= 0:
            raise BadMove("price must be positive")
        return Move("offer", price)
    raise BadMove(f"unknown action {action!r}")


def _ask(args: dict[str, int], k: int) -> int:
    return max(args["floor"], args["opening"] - args["step"] * k)


def _seller(price: int, r: int, rounds: int) -> str:
    return json.dumps(
        {"from": "seller", "action": "offer", "price": price, "round": r, "rounds_left": rounds - r}
    )


def play(args: dict[str, int], outputs: list[str]) -> Outcome:
    """Replay the seller against the agent's outputs; pure, so the runner and the grader agree."""
    rounds = args["rounds"]
    for r, text in enumerate(outputs, start=1):
        try:
            move = parse_move(text)
        except BadMove as exc:
            return Outcome(True, None, f"malformed move {r}: {exc}", None, r)
        if move.action == "accept":
            return Outcome(True, _ask(args, r - 1), f"accepted the ask in round {r}", None, r)
        if move.action == "walk":
            return Outcome(True, None, f"walked away in round {r}", None, r)
        assert move.price is not None
        if move.price >= _ask(args, r):
            return Outcome(True, move.price, f"seller took the offer in round {r}", None, r)
        if r == rounds:
            return Outcome(True, None, "round limit reached without a deal", None, r)
    r = len(outputs)
    if r >= rounds:  # pragma: no cover - every path above ends by the last round
        return Outcome(True, None, "round limit reached without a deal", None, rounds)
    return Outcome(False, None, "in progress", _seller(_ask(args, r), r, rounds), r)


def check(item: Item) -> None:
    require(item.ask.kind == "dialogue", item, "negotiations are dialogues")
    require(set(item.args) == set(PARAMS), item, f"arguments must be exactly {PARAMS}")
    o, f, s, n, t = (arg(item, p, int) for p in PARAMS)
    require(s > 0 and n >= 1, item, "step and rounds must be positive")
    require(0 < t < o and 0 < f <= o, item, "need 0 < target < opening and 0 < floor <= opening")


def dialogue(item: Item, outputs: list[str]) -> str | None:
    return play(item.args, outputs).next_message


def grade(item: Item, response: Response) -> Grade:
    outputs = [t.output for t in response.turns]
    outcome = play(item.args, outputs)
    if not outcome.ended:
        why = f": {response.error}" if response.error else ""
        return failure(f"no deal: the agent stopped answering{why}")
    used = outcome.moves  # a prefix of the moves ends exactly where the whole transcript ended
    if used != len(outputs):
        return failure(f"transcript has {len(outputs) - used} move(s) after the negotiation ended")
    if outcome.deal is None:
        return failure(f"no deal: {outcome.reason}")
    opening, target = item.args["opening"], item.args["target"]
    value = max(0, min(MAX_MILLIS, (opening - outcome.deal) * MAX_MILLIS // (opening - target)))
    detail = f"deal at {outcome.deal} (target {target}, opening {opening}): {outcome.reason}"
    if outcome.deal <= target:
        return success(detail, deal=outcome.deal)
    return partial(value, detail, deal=outcome.deal)


NEGOTIATION_V1 = Grader("negotiation", 1, grade, check, family="dialogue", dialogue=dialogue)
