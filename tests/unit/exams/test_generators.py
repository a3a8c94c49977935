"""Item generators: deterministic, pinned by golden vectors, fresh for every seed, valid for their
graders, and worthless to memorise (a lookup table of 500 instances gains nothing on 200 fresh ones)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from trustscore.exams.forms import FORMS, check_form, instantiate, item_seed, sitting_seed
from trustscore.exams.generators import all_generators, get_generator, item_digest
from trustscore.exams.generators.coding import reference_solution
from trustscore.exams.generators.rng import Rng
from trustscore.exams.generators.vectors import path_of, vectors_of
from trustscore.grading import Response, Turn, get_grader, grade_item
from trustscore.grading.model import Item

GENERATORS = sorted(all_generators())
MEMORISED, FRESH = range(0, 500), range(10_000, 10_200)


def seed(n: int) -> bytes:
    return n.to_bytes(8, "big")


def reply(text: str) -> Response:
    return Response([Turn(text, 10)])


@pytest.mark.parametrize("ref", GENERATORS)
def test_golden_vectors_pin_every_released_generator(ref: str) -> None:
    path = path_of(ref)
    assert path.is_file(), f"no golden vectors for {ref}: run python -m trustscore.exams.generators.vectors"
    pinned = json.loads(path.read_bytes())
    assert pinned == json.loads(msgspec.json.encode(vectors_of(get_generator(ref))))


def test_a_changed_generator_breaks_its_vectors() -> None:
    gen = get_generator("arithmetic@1")
    pinned = json.loads(path_of(gen.ref).read_bytes())["vectors"][0]
    assert item_digest(gen.make(bytes.fromhex(pinned["seed"]))) == pinned["item_digest"]
    assert item_digest(gen.make(bytes.fromhex(pinned["seed"]) + b"\0")) != pinned["item_digest"]


@pytest.mark.parametrize("ref", GENERATORS)
def test_1000_seeds_give_990_distinct_valid_items(ref: str) -> None:
    gen = get_generator(ref)
    digests = set()
    for n in range(1000):
        item = gen.make(seed(n))
        get_grader(item.grader).check(item)  # the grader accepts the arguments
        assert item.tier == "private" and item.dimension == gen.family
        digests.add(item_digest(item))
    assert len(digests) >= 990, f"{ref}: only {len(digests)} distinct items from 1000 seeds"


def test_rng_is_uniform_enough_and_fixed() -> None:
    r = Rng(b"x", "test")
    counts = Counter(r.below(6) for _ in range(60_000))
    assert all(9_500 < c < 10_500 for c in counts.values())
    assert [Rng(b"x", "test").below(1000) for _ in range(3)] == [Rng(b"x", "test").below(1000)] * 3
    assert Rng(b"x", "a").below(10**12) != Rng(b"x", "b").below(10**12)
    with pytest.raises(ValueError):
        r.below(0)


# --- memorising instances gains nothing ------------------------------------------------------------------


def table(ref: str) -> dict[tuple[str, ...], Item]:
    gen = get_generator(ref)
    return {tuple(i.ask.prompts): i for i in (gen.make(seed(n)) for n in MEMORISED)}


@pytest.mark.parametrize("ref", GENERATORS)
def test_no_fresh_prompt_was_seen_among_500_memorised_instances(ref: str) -> None:
    memory = table(ref)
    fresh = [get_generator(ref).make(seed(n)) for n in FRESH]
    hits = sum(tuple(i.ask.prompts) in memory for i in fresh)
    assert hits <= 2, f"{ref}: {hits} of 200 fresh prompts were in the lookup table"


def _answer_text(spec: dict[str, Any]) -> str:
    value = spec.get("value")
    return ", ".join(str(v) for v in value) if isinstance(value, list) else str(value)


def lookup_agent(memory: dict[tuple[str, ...], Item]) -> Callable[[Item], Response]:
    """Answers from the table when the prompt was memorised, else the answer memorised most often."""
    answers = Counter(_answer_text(i.args["answer"]) for i in memory.values() if "answer" in i.args)
    common = answers.most_common(1)[0][0] if answers else "CANNOT ANSWER"

    def agent(item: Item) -> Response:
        known = memory.get(tuple(item.ask.prompts))
        text = _answer_text(known.args["answer"]) if known and "answer" in known.args else common
        return Response([Turn(f"ANSWER: {text}", 10)] * max(item.ask.times, len(item.ask.prompts)))

    return agent


@pytest.mark.parametrize(
    ("ref", "chance"),
    [("arithmetic@1", 0.05), ("sequence@1", 0.05), ("inference@1", 0.25), ("honesty-probe@1", 0.4)],
)
def test_a_lookup_table_of_500_instances_scores_at_chance(ref: str, chance: float) -> None:
    agent = lookup_agent(table(ref))
    items = [get_generator(ref).make(seed(n)) for n in FRESH]
    mean = sum(grade_item(i, agent(i)).value for i in items) / len(items) / 1000
    assert mean <= chance, f"{ref}: the lookup agent scored {mean:.3f}"


def test_reliability_correctness_is_not_memorisable() -> None:
    agent = lookup_agent(table("repeat-check@1"))
    items = [get_generator("repeat-check@1").make(seed(n)) for n in FRESH]
    mean = sum(grade_item(i, agent(i)).value for i in items) / len(items) / 1000  # agreement@2: correct too
    assert mean <= 0.15, f"the lookup agent scored {mean:.3f} on fresh reliability items"


def test_honesty_probes_punish_always_declining() -> None:
    items = [get_generator("honesty-probe@1").make(seed(n)) for n in FRESH]
    decline = Response([Turn("ANSWER: CANNOT ANSWER", 1)] * 2)
    mean = sum(grade_item(i, decline).value for i in items) / len(items) / 1000
    assert 0.2 < mean < 0.5


def test_memorised_security_answers_score_below_a_plain_refusal() -> None:
    memory = table("injection-probe@1")
    utility = Counter(u for i in memory.values() for u in i.args["utility"]).most_common(2)
    parroted = json.dumps({"answer": " ".join(u for u, _ in utility), "actions": []})
    refusal = json.dumps({"answer": "I cannot help with that.", "actions": []})
    items = [get_generator("injection-probe@1").make(seed(n)) for n in FRESH]
    parrot = sum(grade_item(i, reply(parroted)).value for i in items)
    refuse = sum(grade_item(i, reply(refusal)).value for i in items)
    assert parrot <= refuse


def _example(schema: dict[str, Any]) -> Any:
    """A value valid for a generated field schema (enough for json-record@1's field kinds)."""
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    if schema.get("type") == "integer":
        return schema["minimum"]
    if schema.get("type") == "array":
        return ["x"] * schema["minItems"]
    if "pattern" in schema:
        prefix, digits = schema["pattern"][1:].split("-[0-9]{")
        return f"{prefix}-{'1' * int(digits.rstrip('}$'))}"
    if schema.get("type") == "string":
        return "y" * schema["minLength"]
    return {k: _example(v) for k, v in schema["properties"].items()}


def test_memorised_deliverables_fail_fresh_schemas() -> None:
    memory = list(table("json-record@1").values())
    answers = [json.dumps(_example(i.args["schema"])) for i in memory]
    assert all(grade_item(i, reply(a)).value == 1000 for i, a in zip(memory, answers, strict=True))
    common = Counter(answers).most_common(1)[0][0]
    items = [get_generator("json-record@1").make(seed(n)) for n in FRESH]
    assert sum(grade_item(i, reply(common)).value for i in items) == 0


def _negotiate(item: Item, strategy: Callable[[int, int | None], str]) -> int:
    dialogue = get_grader(item.grader).dialogue
    assert dialogue is not None
    moves: list[str] = []
    ask: int | None = None
    while (msg := dialogue(item, moves)) is not None and len(moves) < 64:
        ask = json.loads(msg).get("price", ask) if msg.startswith("{") else ask
        moves.append(strategy(len(moves), ask))
    return grade_item(item, Response([Turn(m, 1) for m in moves])).value


def test_a_floor_reader_with_500_memorised_floors_gains_nothing() -> None:
    memory = table("price-haggle@1")
    ratios = sorted(i.args["floor"] * 1000 // i.args["opening"] for i in memory.values())
    median = ratios[len(ratios) // 2]
    items = [get_generator("price-haggle@1").make(seed(n)) for n in FRESH]

    def patient(item: Item) -> Callable[[int, int | None], str]:
        def move(k: int, ask: int | None) -> str:
            if k + 1 >= item.args["rounds"]:
                return '{"action": "accept"}'
            return json.dumps({"action": "offer", "price": 1})

        return move

    def memorised(item: Item) -> Callable[[int, int | None], str]:
        guess = item.args["opening"] * median // 1000  # the best a table can say about a fresh floor

        def move(k: int, ask: int | None) -> str:
            if k + 1 >= item.args["rounds"]:
                return '{"action": "accept"}'
            return json.dumps({"action": "offer", "price": guess})

        return move

    def floor_reader(item: Item) -> Callable[[int, int | None], str]:
        def move(k: int, ask: int | None) -> str:
            if (ask is not None and ask <= item.args["floor"]) or k + 1 >= item.args["rounds"]:
                return '{"action": "accept"}'
            return json.dumps({"action": "offer", "price": item.args["floor"]})

        return move

    patient_total = sum(_negotiate(i, patient(i)) for i in items)
    memorised_total = sum(_negotiate(i, memorised(i)) for i in items)
    reader_total = sum(_negotiate(i, floor_reader(i)) for i in items)
    # Memorised floors of other instances are worth no more than plain patience (which, against this
    # seller, is as good as reading this instance's floor).
    assert memorised_total <= patient_total <= reader_total


# --- forms and seeds ------------------------------------------------------------------------------------


def test_every_form_instantiates_and_seeds_separate_items() -> None:
    s = sitting_seed(b"\1" * 32, b"\2" * 32, b"\3" * 32)
    assert s != sitting_seed(b"\1" * 32, b"\2" * 32, b"\4" * 32)
    assert item_seed(s, "a-001") != item_seed(s, "a-002")
    for exam, form in FORMS.items():
        check_form(form)
        items = instantiate(form, s)
        assert len({i.id for i in items}) == len(items) == sum(p.count for p in form), exam
        assert items == instantiate(form, s)
        assert items != instantiate(form, sitting_seed(b"\1" * 32, b"\2" * 32, b"\5" * 32))


def test_reference_solutions_pass_their_hidden_tests_in_the_sandbox() -> None:
    gen = get_generator("python-code@1")
    for n in range(8):
        item = gen.make(seed(n))
        grade = grade_item(item, reply(f"```python\n{reference_solution(seed(n))}```"))
        assert grade.value == 1000, (item.ask.prompts[0], grade.detail)
        wrong = grade_item(item, reply("```python\ndef f(*a):\n    return 0\n```"))
        assert wrong.value < 1000
