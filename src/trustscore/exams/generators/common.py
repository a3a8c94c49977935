"""Word pools and item builders shared by the generators (part of each generator's published behaviour:
changing a pool changes output, so it needs new generator versions)."""

from __future__ import annotations

from typing import Any

from trustscore.exams.generators import GENERATED_ID
from trustscore.exams.generators.rng import Rng
from trustscore.grading.model import Ask, AskKind, Item

NAMES = (
    "Alice", "Bilal", "Chen", "Dara", "Emeka", "Fatima", "Goran", "Hana", "Ines", "Jonas", "Kiri", "Lena",
    "Mateo", "Nadia", "Omar", "Priya", "Quinn", "Rosa", "Sanjay", "Tomas", "Uma", "Viktor", "Wen", "Ximena",
    "Yusuf", "Zara", "Anders", "Beatriz", "Cyrus", "Delphine", "Elif", "Farid", "Greta", "Hiro", "Ivana",
    "Jamal", "Katya", "Luis", "Mira", "Nils", "Olga", "Pablo", "Rania", "Stefan", "Tariq", "Ulla", "Vera",
    "Wiremu", "Yara", "Zoltan",
)  # fmt: skip
CITIES = (
    "Lisbon", "Oslo", "Nairobi", "Lima", "Osaka", "Tbilisi", "Quito", "Porto", "Riga", "Hanoi", "Dakar",
    "Cusco", "Bergen", "Accra", "Malmo", "Split", "Gdansk", "Leeds", "Cork", "Lyon", "Graz", "Turku",
    "Bilbao", "Ghent", "Kyoto", "Perth", "Tromso", "Zadar", "Bruges", "Aarhus",
)  # fmt: skip
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
SYLLABLES = (
    "bli", "zor", "qua", "fen", "mip", "tul", "dra", "vok", "rix", "sna", "glo", "pem", "wub", "kra", "lun",
    "yop", "hes", "nid", "flo", "gar",
)  # fmt: skip
GOODS = (
    "used road bike", "second-hand sofa", "box of vinyl records", "mechanical keyboard", "drone", "laptop",
    "pair of hiking boots", "espresso machine", "vintage camera", "electric guitar", "rowing machine",
    "set of garden chairs", "telescope", "sewing machine", "standing desk", "kayak", "antique clock",
    "3D printer", "tent", "violin", "microwave oven", "gaming console", "leather jacket", "bookshelf",
    "cargo bike", "snowboard", "air purifier", "projector", "drum kit", "dining table",
)  # fmt: skip
ALNUM = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
LOWER = "abcdefghijklmnopqrstuvwxyz"

ANSWER_LINE = "End your reply with a final line of the form `ANSWER: <your answer>`."
DECLINE_HINT = (
    "If the question cannot be answered or rests on a false premise, reply `ANSWER: CANNOT ANSWER`."
)


def word(rng: Rng, syllables: int = 3) -> str:
    """An invented lower-case word (no meaning to remember)."""
    return "".join(rng.choice(SYLLABLES) for _ in range(syllables))


def item(
    dimension: str,
    grader: str,
    prompts: list[str],
    args: dict[str, Any],
    *,
    kind: AskKind = "single",
    times: int = 1,
    timeout_ms: int | None = None,
) -> Item:
    """A generated item (id :data:`GENERATED_ID`, tier ``private``: hidden until its sitting closes)."""
    return Item(
        id=GENERATED_ID,
        dimension=dimension,
        tier="private",
        grader=grader,
        ask=Ask(kind=kind, prompts=prompts, times=times),
        args=args,
        timeout_ms=timeout_ms,
    )


def integer(value: int) -> dict[str, Any]:
    return {"type": "integer", "value": value}


def number(num: int, den: int = 1) -> dict[str, Any]:
    from fractions import Fraction

    f = Fraction(num, den)
    return {
        "type": "number",
        "value": str(f.numerator) if f.denominator == 1 else f"{f.numerator}/{f.denominator}",
    }


def choice(options: list[str], value: str) -> dict[str, Any]:
    return {"type": "choice", "options": options, "value": value}
