"""Public, cacheable reads: agents, ratings, evidence, leaderboard, methodology, exams."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import Controller, Request, get
from litestar.datastructures import CacheControlHeader
from litestar.di import NamedDependency
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import OpenAPIType, Parameter, Schema
from litestar.params import FromPath, QueryParameter
from litestar.response.base import ASGIResponse

from trustscore.api.openapi import READ_PROBLEMS, STARTING, operation_class
from trustscore.api.query import DECIMAL
from trustscore.api.wiring import services_of
from trustscore.errors import InvalidInput
from trustscore.evidence.standing import POLICY_VERSION as STANDING_POLICY
from trustscore.evidence.standing import PolicyDescription
from trustscore.grading import sandbox
from trustscore.ladder.rows import LadderRow
from trustscore.ladder.stats import Distribution
from trustscore.ladder.work_evidence import VERSION as WORK_EVIDENCE
from trustscore.ledger import statements
from trustscore.reverify.status import VerificationStatus
from trustscore.scope.report import ScopeSummary
from trustscore.scoring import publish
from trustscore.scoring.medals import Medal, Medals
from trustscore.services.ladder import LadderService
from trustscore.services.log import LogService
from trustscore.services.public import PublicService
from trustscore.services.ratings import RatedAgent

PUBLIC = CacheControlHeader(public=True, max_age=5)


class AgentOut(msgspec.Struct):
    id: str
    kind: str
    name: str
    endpoint: str | None
    controller: str | None
    card_index: int
    card: dict[str, Any]
    verification: VerificationStatus
    # Ids of agents registered earlier whose display names look like this one's (NFKC, case, homoglyphs):
    # show names with their ids; a non-empty list is a warning (trustscore.names).
    name_confusable_with: list[str] = []


class AgentRowOut(msgspec.Struct):
    id: str
    kind: str
    name: str


class AgentListOut(msgspec.Struct):
    agents: list[AgentRowOut]
    next: str | None  # the ``after`` of the next page; None on the last page


class DimensionOut(msgspec.Struct):
    score: float | None
    n: int | None
    n_eff: float | None
    interval: tuple[float, float] | None
    null_reason: str | None
    # The rung distribution of this dimension's evidence and its verified share (rung >= 3), with n
    # (docs/evidence-ladder.md); null when no evidence item of the dimension has a rung.
    ladder: Distribution | None = None


class RatingOut(msgspec.Struct):
    agent: str
    model_version: str
    weights_digest: str
    computed_at: str
    log_size: int
    checkpoint_size: int | None
    total: int | None
    adjusted: int | None
    grade: str | None
    coverage: float
    confidence: float | None
    n: int
    dimensions: dict[str, DimensionOut]
    total_interval: tuple[int, int] | None
    null_reasons: dict[str, str]
    verification: VerificationStatus
    standing_policy: str = STANDING_POLICY  # the reporter-standing policy the evidence was derived with
    work_evidence: str = WORK_EVIDENCE  # the derivation of work records' evidence (docs/evidence-ladder.md)
    # SHS, tier, status and RTS (docs/scope-honesty.md): its own score beside the dimensions, not in them
    scope_honesty: ScopeSummary | None = None
    # Per dimension the medal or why none (docs/methodology.md, "Medals"); null for a model without medals
    medals: Medals | None = None


class EvidenceOut(msgspec.Struct):
    index: int
    seq: int
    dimension: str
    source: str
    value: float | None
    result: str | None
    key: str | None
    at: str
    issuer: str | None
    extra_weight: float
    rung: int | None = None  # the item's rung on the evidence ladder (docs/evidence-ladder.md)
    rung_rule: str | None = None  # the rule version the rung was written under


class EvidencePage(msgspec.Struct):
    agent: str
    items: list[EvidenceOut]
    next: str | None  # the cursor of the next page ("index.seq"), None on the last page
    # The log size the page reflects: the evidence of every entry below it is on this page or later ones
    # (from a lagging read replica, smaller than the primary's; docs/operations.md, "Read replicas").
    log_size: int


class RankedOut(msgspec.Struct):
    rank: int
    agent: str
    score: float | None
    total: int | None
    grade: str | None
    medals: dict[str, Medal] = {}  # the dimensions that earned a medal, with it


class UnrankedOut(msgspec.Struct):
    agent: str
    reason: str


class LeaderboardOut(msgspec.Struct):
    model_version: str
    dimension: str | None
    ranked: list[RankedOut]
    unranked: list[UnrankedOut]
    # The log size the board was made at: the ratings it ranks are those of the log's first log_size
    # entries (a board made while the log moved may be a little behind the latest checkpoint).
    log_size: int


class ModelOut(msgspec.Struct):
    model_version: str
    weights_digest: str
    weights_toml: str
    default: bool


class SandboxOut(msgspec.Struct):
    """Which isolation grades code items here: ``kernel``, ``weak`` (operator opt-in) or ``refused``."""

    mode: str
    mechanisms: str
    reason: str


class MethodologyOut(msgspec.Struct):
    models: list[ModelOut]
    document: str
    sandbox: SandboxOut
    standing_policy: PolicyDescription = PolicyDescription()
    work_evidence: str = WORK_EVIDENCE


class ExamOut(msgspec.Struct):
    id: str
    name: str
    version: int
    digest: str
    items: int


Public = NamedDependency[PublicService]
Log = NamedDependency[LogService]
Model = Annotated[str | None, QueryParameter(description="model version (default trustscore-v2)")]


def _rung(row: LadderRow | None) -> tuple[int | None, str | None]:
    return (None, None) if row is None else (row.rung, row.rule)


def parse_cursor(text: str | None) -> tuple[int, int]:
    """An evidence cursor ``index.seq``; before everything when absent."""
    if text is None:
        return (-1, -1)
    index, dot, seq = text.partition(".")
    # DECIMAL, not str.isdigit: "²" is a digit to isdigit and no number to int (a 500, found by review)
    if not (
        dot and DECIMAL.fullmatch(index) and DECIMAL.fullmatch(seq) and len(index) <= 18 and len(seq) <= 9
    ):
        raise InvalidInput("after must be a cursor of the form INDEX.SEQ from a previous page")
    return (int(index), int(seq))


def awarded(medals: Medals | None) -> dict[str, Medal]:
    """The medals earned, by dimension (none for a model without medals)."""
    if medals is None:
        return {}
    return {name: m.medal for name, m in medals.dimensions.items() if m.medal is not None}


def encode_rating(
    rated: RatedAgent,
    checkpoint_size: int | None,
    verification: VerificationStatus,
    ladder: dict[str, Distribution] | None = None,
    scope: ScopeSummary | None = None,
) -> bytes:
    return msgspec.json.encode(rating_out(rated, checkpoint_size, verification, ladder, scope))


def rating_out(
    r: RatedAgent,
    checkpoint_size: int | None,
    verification: VerificationStatus,
    ladder: dict[str, Distribution] | None = None,
    scope: ScopeSummary | None = None,
) -> RatingOut:
    rating = publish.published(r.rating)  # every float rounded as documented, like `trustscore score`
    stats = rating.uncertainty.dimensions if rating.uncertainty else {}
    dims = {}
    for name, score in rating.dimensions.items():
        s = stats.get(name)
        dims[name] = DimensionOut(
            score=score,
            n=s.n if s else None,
            n_eff=s.n_eff if s else None,
            interval=s.interval if s else None,
            null_reason=rating.null_reasons.get(f"dimensions.{name}"),
            ladder=(ladder or {}).get(name),
        )
    return RatingOut(
        agent=rating.agent,
        model_version=rating.model_version,
        weights_digest=rating.weights_digest,
        computed_at=statements.format_time(r.at),
        log_size=r.log_size,
        checkpoint_size=checkpoint_size,
        total=rating.total,
        adjusted=rating.adjusted,
        grade=rating.grade,
        coverage=rating.coverage,
        confidence=rating.confidence,
        n=rating.n,
        dimensions=dims,
        total_interval=rating.uncertainty.total_interval if rating.uncertainty else None,
        null_reasons=rating.null_reasons,
        verification=verification,
        scope_honesty=scope,
        medals=r.medals,
    )


# The rating route is the hottest read. It takes only the request (no dependency or parameter parsing)
# and answers with the cached encoded body and fixed headers, so it costs about what /healthz costs;
# its OpenAPI description is filled in by hand instead.
RATING_HEADERS = {"cache-control": PUBLIC.to_header(), "content-type": "application/json"}
MODEL_PARAMETER = Parameter(
    name="model",
    param_in="query",
    required=False,
    description="model version (default trustscore-v2)",
    schema=Schema(type=OpenAPIType.STRING),
)


def public_service(request: Request[Any, Any, Any]) -> PublicService:
    """The app's public read service (on the app's runtime once the lifespan has started it)."""
    return services_of(request.app.state).public


async def agent_out(public: PublicService, agent_id: str) -> AgentOut:
    """The agent route's answer (also the MCP and A2A ``lookup_agent``)."""
    c = await public.card(agent_id)
    status = await public.verification(agent_id)
    lookalikes = await public.lookalikes(c) if c.kind == "agent" else []
    return AgentOut(c.id, c.kind, c.name, c.endpoint, c.controller, c.index, c.card, status, lookalikes)


async def leaderboard_out(
    public: PublicService, model: str | None, dimension: str | None, limit: int
) -> LeaderboardOut:
    """The leaderboard route's answer (also the MCP and A2A ``leaderboard``)."""
    board = await public.leaderboard(model, dimension, limit)
    return LeaderboardOut(
        board.model,
        board.dimension,
        [
            RankedOut(
                r.rank,
                r.rated.rating.agent,
                publish.optional(r.score),
                r.rated.rating.total,
                r.rated.rating.grade,
                awarded(r.rated.medals),
            )
            for r in board.ranked
        ],
        [UnrankedOut(r.rating.agent, reason) for r, reason in board.unranked],
        board.stamp[1],
    )


class PublicController(Controller):
    path = "/v1"
    tags = ["public"]  # noqa: RUF012 - Litestar class attribute
    cache_control = PUBLIC

    @get("/agents", operation_id="listAgents", responses=READ_PROBLEMS)
    async def agents(
        self,
        public: Public,
        after: Annotated[
            str | None, QueryParameter(description="the previous page's `next` (an agent id)", max_length=64)
        ] = None,
        limit: Annotated[int, QueryParameter(ge=1, le=1000)] = 100,
    ) -> AgentListOut:
        """Registered agents in id order with their display names, a page at a time."""
        cards = await public.agents(after, limit)
        rows = [AgentRowOut(c.id, c.kind, c.name) for c in cards]
        return AgentListOut(rows, rows[-1].id if len(rows) == limit else None)

    @get("/agents/{agent_id:str}", operation_id="getAgent", responses=READ_PROBLEMS)
    async def agent(self, public: Public, agent_id: FromPath[str]) -> AgentOut:
        """An agent's (or party's) current card and status."""
        return await agent_out(public, agent_id)

    @get(
        "/agents/{agent_id:str}/rating",
        operation_id="getRating",
        operation_class=operation_class(parameters=[MODEL_PARAMETER]),
        responses={200: ResponseSpec(RatingOut, description="the rating"), **READ_PROBLEMS},
    )
    async def rating(self, request: Request[Any, Any, Any]) -> ASGIResponse:
        """The agent's rating under a model, with every dimension's n, interval and null reason; the
        encoded body is reused until the rating or the log moves on."""
        body = await public_service(request).rating_body(
            request.path_params["agent_id"], request.query_params.get("model"), encode_rating
        )
        return ASGIResponse(body=body, headers=RATING_HEADERS)

    @get("/agents/{agent_id:str}/evidence", operation_id="getEvidence", responses=READ_PROBLEMS)
    async def evidence(
        self,
        public: Public,
        ladder: NamedDependency[LadderService],
        agent_id: FromPath[str],
        after: Annotated[
            str | None, QueryParameter(description="the previous page's `next` cursor (INDEX.SEQ)")
        ] = None,
        limit: Annotated[int, QueryParameter(ge=1, le=1000)] = 100,
    ) -> EvidencePage:
        """The evidence items about an agent in log order, each with the log index that proves it and its
        rung on the evidence ladder, paged."""
        size, rows = await public.evidence(agent_id, parse_cursor(after), limit)
        rungs = await ladder.rungs(agent_id, [(r.index, r.seq) for r in rows])
        items = [
            EvidenceOut(
                r.index,
                r.seq,
                r.item.dimension,
                r.item.source,
                r.item.value,
                r.item.result,
                r.item.key,
                statements.format_time(r.item.at),
                r.item.issuer,
                r.item.extra_weight,
                *_rung(rungs.get((r.index, r.seq))),
            )
            for r in rows
        ]
        return EvidencePage(
            agent_id, items, f"{rows[-1].index}.{rows[-1].seq}" if len(rows) == limit else None, size
        )

    @get("/leaderboard", operation_id="getLeaderboard", responses=READ_PROBLEMS)
    async def leaderboard(
        self,
        public: Public,
        model: Model = None,
        dimension: Annotated[str | None, QueryParameter()] = None,
        limit: Annotated[int, QueryParameter(ge=1, le=1000)] = 100,
    ) -> LeaderboardOut:
        """Agents ranked by total (or one dimension); registered agents without a score are listed apart
        with the reason (at most ``limit`` of each)."""
        return await leaderboard_out(public, model, dimension, limit)

    @get("/methodology", operation_id="getMethodology", responses=STARTING)
    async def methodology(self, public: Public) -> MethodologyOut:
        """The published weights files of every served model and the methodology with every formula."""
        doc, models = public.methodology()
        iso = sandbox.isolation()
        return MethodologyOut(
            [ModelOut(*m) for m in models], doc, SandboxOut(iso.mode, iso.mechanisms, iso.reason)
        )

    @get("/exams", operation_id="listExams", responses=STARTING)
    async def exams(self, public: Public) -> list[ExamOut]:
        """The public exam sets with their digests."""
        return [ExamOut(e.id, e.name, e.version, e.digest, len(e.items)) for e in public.exams()]
