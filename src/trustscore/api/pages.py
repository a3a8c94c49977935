"""Server-rendered pages for people: home, leaderboard, agent profiles, the log browser, methodology.

Each page calls the same services as the JSON API (no HTTP to itself) and renders a Jinja2 template
(``api/templates``) through Litestar's template support. Every page works without JavaScript; the one
script (``static/verify.js``) only adds the in-browser proof check on a log entry's page. See
docs/pages.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from litestar import Controller, Request, Response, get
from litestar.datastructures import CacheControlHeader, ResponseHeader
from litestar.di import NamedDependency
from litestar.params import FromPath, QueryParameter
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.response import Redirect, Template
from litestar.static_files import create_static_files_router
from litestar.template.config import TemplateConfig
from litestar.types import ControllerRouterHandler
from markdown_it import MarkdownIt
from markupsafe import Markup

from trustscore.api.openapi import MAX_INDEX
from trustscore.api.pages_api import Pages, PagesApiController
from trustscore.api.problems import shortened
from trustscore.api.public_routes import RatingOut, parse_cursor, rating_out
from trustscore.api.public_url import public_base
from trustscore.api.wiring import services_of
from trustscore.errors import InvalidInput, TrustscoreError
from trustscore.kinds.graded import DIMENSIONS
from trustscore.ledger import keys
from trustscore.names import DisplayNames
from trustscore.pages import charts
from trustscore.pages import medals as medal_words
from trustscore.scoring.medals import MedalsFile
from trustscore.services.agent_search import MAX_QUERY
from trustscore.services.pages import MAX_HISTORY, PageService, b64
from trustscore.services.public import PublicService
from trustscore.services.ratings import RatedAgent

HERE = Path(__file__).parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"
HTML = "text/html"  # Litestar adds the charset
PAGE_CACHE = CacheControlHeader(public=True, max_age=5)
# Defence in depth behind the escaping: only this origin's script and stylesheet run (the bars' widths
# are inline style attributes), nothing frames the pages, forms post only here.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
TOP = 10  # agents on the home page
BOARD = 100  # agents per leaderboard table
EVIDENCE_PAGE = 100  # evidence items per profile page
BOARD_PAGE_AGE = 30.0  # seconds a rendered /leaderboard is served while its board and checkpoint hold
METHODOLOGY_PAGE = "trustscore.methodology_page"  # the app state's key of the rendered /methodology

Public = NamedDependency[PublicService]
Model = Annotated[str | None, QueryParameter(description="model version (default trustscore-v2)")]
_markdown = MarkdownIt("commonmark", {"html": False}).enable("table")


def templates() -> TemplateConfig[JinjaTemplateEngine]:
    """Jinja2 over ``api/templates``, every value escaped unless a template marks it safe."""
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(default=True))
    env.filters["b64"] = b64
    env.filters["hex"] = lambda b: bytes(b).hex()
    env.globals["medal_why_none"] = medal_words.why_none
    env.globals["medal_thresholds"] = medal_words.thresholds
    return TemplateConfig(instance=JinjaTemplateEngine.from_environment(env))


def page(name: str, status_code: int = 200, **context: Any) -> Template:
    return Template(template_name=name, context=context, status_code=status_code, media_type=HTML)


#: Every page's headers, set on the controller; an exception handler's response does not get a
#: controller's headers, so the error page sets them itself.
PAGE_HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff"}


def _error_page(request: Request[Any, Any, Any], exc: TrustscoreError) -> Response[Any]:
    """A failed page is an HTML page saying what went wrong, with the error's status (404, 400, 503) and
    every page's headers (before 2026-12-07 it had neither the CSP nor nosniff: found by review)."""
    return Template(
        template_name="error.html",
        context={"status": exc.status, "title": exc.title, "detail": shortened(exc.message)},
        status_code=exc.status,
        media_type=HTML,
        headers=PAGE_HEADERS,
    )


def _chart(points: list[charts.Point], title: str) -> Markup:
    """The history chart, safe to inline: charts.py escapes every text it writes (the title too)."""
    return Markup(charts.history_svg(points, title=title))  # noqa: S704 - escaped by charts.py


async def _rows(public: PublicService, rated: list[RatedAgent]) -> list[RatingOut]:
    """Each rating as the JSON API publishes it (same rounding), with verification and scope honesty,
    read for all the rows together (two queries for every row's verification status)."""
    agents = [r.rating.agent for r in rated]
    statuses = await public.verifications(agents)
    scopes = await public.scope_summaries(agents)
    return [rating_out(r, None, statuses[a], None, scopes[a]) for r, a in zip(rated, agents, strict=True)]


def _medal_rules(public: PublicService, model: str) -> MedalsFile | None:
    """The medals file of ``model``; None when the model has none (no medal rules, not "no medals")."""
    rules = public.ratings.medals.get(model)
    return None if rules is None else rules.spec


async def _agent_page(
    engine: JinjaTemplateEngine,
    public: PublicService,
    pages: PageService,
    base_url: str,
    agent_id: str,
    model: str | None,
    after: tuple[int, int],
) -> bytes:
    """The profile page of ``agent_id`` rendered now (``engine`` is the app's: no request is needed, so a
    stale page can be rendered again after its reader has been answered)."""
    card = await public.card(agent_id)
    rated = await public.rating(agent_id, model)
    checkpoint = await pages.checkpoint()
    out = rating_out(
        rated,
        None if checkpoint is None else checkpoint.size,
        await public.verification(agent_id),
        None,
        await public.scope_summary(agent_id),
    )
    history = await pages.history(agent_id, out.model_version, 0, MAX_INDEX, MAX_HISTORY, newest=True)
    points = [charts.Point(p.index, p.at, p.total) for p in history.points]
    _, evidence = await public.evidence(agent_id, after, EVIDENCE_PAGE)
    last = evidence[-1] if len(evidence) == EVIDENCE_PAGE else None
    return str(
        engine.get_template("agent.html").render(
            base_url=base_url,
            card=card,
            rating=out,
            lookalikes=await public.lookalikes(card) if card.kind == "agent" else [],
            chart=_chart(points, f"Rating history of {card.name} ({out.model_version})"),
            history=points,
            evidence=evidence,
            next_cursor=None if last is None else f"{last.index}.{last.seq}",
            models=sorted(public.ratings.models),
            scale=int(public.ratings.model(out.model_version).spec.total.scale * 100),
            medal_rules=_medal_rules(public, out.model_version),
        )
    ).encode()


class PagesController(Controller):
    """The HTML pages; not part of the API document."""

    include_in_schema = False
    cache_control = PAGE_CACHE
    response_headers = [  # noqa: RUF012 - Litestar class attribute
        ResponseHeader(name=name, value=value) for name, value in PAGE_HEADERS.items()
    ]
    exception_handlers = {TrustscoreError: _error_page}  # noqa: RUF012 - Litestar class attribute

    @get("/", name="home")
    async def home(
        self,
        public: Public,
        pages: Pages,
        q: Annotated[str | None, QueryParameter(max_length=MAX_QUERY)] = None,
    ) -> Template | Redirect:
        """Search, log status, the top agents and how to get rated."""
        directory = await pages.directory()  # read once: names, the search and the board share it
        names = DisplayNames(directory)
        if q is not None and keys.is_key_id(q.strip()) and q.strip() in names:
            return Redirect(f"/agents/{q.strip()}")
        results = await pages.search(q, directory) if q is not None else None
        board = await public.leaderboard(None, None, TOP, directory)
        top = list(zip(board.ranked, await _rows(public, [r.rated for r in board.ranked]), strict=True))
        return page(
            "home.html",
            q=q,
            results=results,
            checkpoint=await pages.checkpoint(),
            top=top,
            names=names,
            model=board.model,
        )

    @get("/leaderboard", name="leaderboard")
    async def leaderboard(
        self,
        request: Request[Any, Any, Any],
        public: Public,
        pages: Pages,
        model: Model = None,
        dimension: Annotated[str | None, QueryParameter()] = None,
    ) -> Response[bytes]:
        """Ranked agents with intervals, n, coverage, verification and scope tier; unranked apart.

        The rendered page is kept while its board holds (the same ratings and log size, no new agent) and
        the checkpoint stays, for at most :data:`BOARD_PAGE_AGE` seconds (a scope status may change with
        the time alone). Each view read the rows' re-verification statuses and scope summaries and
        rendered 200 rows again before 2026-12-07 (~86 ms with 50 rated agents of a year's runs)."""
        # The page's form sends ``dimension=total`` for the total (an empty value is refused everywhere).
        dimension = None if dimension == "total" else dimension
        public.board_model(model, dimension)  # a query no board answers is refused before any read
        directory = await pages.directory()  # read once: the board and its names share it
        board = await public.leaderboard(model, dimension, BOARD, directory)
        engine = request.app.template_engine
        assert engine is not None

        async def render() -> bytes:
            rated = [r.rated for r in board.ranked] + [rated for rated, _ in board.unranked]
            outs = await _rows(public, rated)
            ranked = list(zip(board.ranked, outs[: len(board.ranked)], strict=True))
            unranked = [
                (reason, out)
                for (_, reason), out in zip(board.unranked, outs[len(board.ranked) :], strict=True)
            ]
            return str(
                engine.get_template("leaderboard.html").render(
                    board=board,
                    ranked=ranked,
                    unranked=unranked,
                    names=DisplayNames(directory),
                    models=sorted(public.ratings.models),
                    dimensions=DIMENSIONS,
                    medals_defined=board.model in public.ratings.medals,
                )
            ).encode()

        # What the page shows moves with the board, any integrated entry (statuses, scope runs) and any
        # card read into the directory (names: a rename is read before a checkpoint covers it).
        stamp = (board.stamp, pages.log.checkpoint_size, directory.next_index)
        body = await pages.board_page((board.model, dimension), stamp, BOARD_PAGE_AGE, render)
        return Response(body, media_type=HTML)

    @get("/agents/{agent_id:str}", name="agent")
    async def agent(self, request: Request[Any, Any, Any]) -> Response[bytes]:
        """One agent: rating with intervals, dimensions, history chart, verification, evidence, badge;
        ``?model=`` (default trustscore-v2) and ``?after=INDEX.SEQ`` (the evidence cursor). The rendered
        page is reused until anything it shows can have changed (PageService.stamp, PageService.page).
        Like the rating route, it takes only the request: the hottest page skips parameter parsing."""
        services = services_of(request.app.state)
        agent_id = request.path_params["agent_id"]
        model = request.query_params.get("model")
        # Parsed once, for the kept page's key and for the rendering. A cursor has one spelling
        # (parse_cursor refuses another), so the key needs no other normal form.
        after = parse_cursor(request.query_params.get("after"))
        base_url, headers = public_base(request)
        engine = request.app.template_engine
        assert engine is not None

        async def make() -> bytes:
            return await _agent_page(
                engine, services.public, services.pages, base_url, agent_id, model, after
            )

        stamp = services.pages.stamp(agent_id, model)
        if stamp is None:
            body = await make()
        else:
            # Kept by what the page shows, not by how the query spelled it: no "?model=" is the default
            # model named (the two were rendered and kept apart).
            version = services.public.ratings.model(model).model_version
            key = (agent_id, version, f"{after[0]}.{after[1]}", base_url)
            body = await services.pages.page(key, stamp, make)
        return Response(body, media_type=HTML, headers=headers)

    @get("/log", name="log")
    async def log(self, pages: Pages) -> Template:
        """The latest checkpoint and the most recent entries."""
        checkpoint = await pages.checkpoint()
        size = 0 if checkpoint is None else checkpoint.size
        return page(
            "log.html",
            checkpoint=checkpoint,
            entries=await pages.recent_entries(size),
            verifier_key=pages.log.verifier_key,
        )

    @get("/log/entries/{index:int}", name="entry")
    async def entry(self, pages: Pages, index: FromPath[int]) -> Template:
        """One entry decoded, with its inclusion proof in the latest checkpoint and an in-page verifier."""
        if not 0 <= index <= MAX_INDEX:
            raise InvalidInput(f"an entry index is 0..{MAX_INDEX}")
        entry = await pages.entry(index)
        checkpoint = await pages.checkpoint()
        proof: list[bytes] = []
        if checkpoint is not None and index < checkpoint.size:
            proof = await pages.log.inclusion_proof(index, checkpoint.size)
        return page(
            "entry.html",
            entry=entry,
            checkpoint=checkpoint,
            proof=proof,
            verifier_key=pages.log.verifier_key,
        )

    @get("/methodology", name="methodology")
    async def methodology(self, request: Request[Any, Any, Any]) -> Response[bytes]:
        """Every served weights file, the dimension weights side by side, and the methodology text.

        Rendered at the first request and kept for the process: it shows published files only (the
        document and the served models' weights files), which do not change while it runs. It was
        rendered at every request before 2026-12-07 (Markdown and template, 35-67 ms of the event loop)."""
        body = request.app.state.get(METHODOLOGY_PAGE)
        if not isinstance(body, bytes):
            public = services_of(request.app.state).public
            engine = request.app.template_engine
            assert engine is not None
            doc, models = public.methodology()
            weights = {name: public.ratings.models[name].spec.dimensions for name, *_ in models}
            body = str(
                engine.get_template("methodology.html").render(
                    models=models,
                    weights=weights,
                    dimensions=DIMENSIONS,
                    document=Markup(_markdown.render(doc)),  # noqa: S704 - raw HTML is off in the renderer
                )
            ).encode()
            request.app.state[METHODOLOGY_PAGE] = body
        return Response(body, media_type=HTML)


#: What app.py adds to its route handlers: the pages, the badge and history routes, the static files.
PAGE_HANDLERS: list[ControllerRouterHandler] = [
    PagesController,
    PagesApiController,
    create_static_files_router(
        path="/static",
        directories=[STATIC],
        cache_control=CacheControlHeader(public=True, max_age=3600),
        include_in_schema=False,
        name="static",
    ),
]
