"""``price-haggle@1``: a negotiation against the scripted seller of ``negotiation@1`` with a fresh
opening price, private floor, step, round limit and target."""

from __future__ import annotations

from trustscore.exams.generators import Generator, register
from trustscore.exams.generators.common import GOODS, item
from trustscore.exams.generators.rng import Rng
from trustscore.grading.model import Item


def price_haggle(seed: bytes) -> Item:
    """Goods one of 30; opening 40..2000; floor 55..95 % of opening; step 1..10 % of opening (≥ 1);
    rounds 3..12; target 50..95 % of opening (it may lie below the floor: then no deal reaches it)."""
    r = Rng(seed, "price-haggle@1")
    goods = r.choice(GOODS)
    opening = r.between(40, 2000)
    floor = max(1, opening * r.between(55, 95) // 100)
    step = max(1, opening * r.between(1, 10) // 100)
    rounds = r.between(3, 12)
    target = max(1, min(opening - 1, opening * r.between(50, 95) // 100))
    article = "an" if goods[0] in "aeiou" else "a"
    prompt = (
        f"You are buying {article} {goods} from a seller. Your target price is {target} or less. There are at "
        f"most {rounds} rounds; each round you make one move and the seller answers. Reply each turn with "
        'exactly one JSON object and nothing else: {"action": "offer", "price": <integer>}, '
        '{"action": "accept"} (pay the seller\'s current price) or {"action": "walk"}. The seller\'s '
        "messages are JSON objects with its current price."
    )
    args = {"opening": opening, "floor": floor, "step": step, "rounds": rounds, "target": target}
    return item("negotiation", "negotiation@1", [prompt], args, kind="dialogue")


PRICE_HAGGLE = register(Generator("price-haggle", 1, "negotiation", price_haggle, price_haggle.__doc__ or ""))
