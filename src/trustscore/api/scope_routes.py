"""Scope honesty over HTTP (docs/scope-honesty.md): an agent's SHS, components with n, tier, status and
runs, and one capability's history. Read-only; everything is recomputed from the log."""

from __future__ import annotations

from litestar import Controller, get
from litestar.di import NamedDependency
from litestar.params import FromPath

from trustscore.api.openapi import READ_PROBLEMS
from trustscore.scope.report import CapabilityHistory, ScopeHonesty
from trustscore.services.scope import ScopeService

Scope = NamedDependency[ScopeService]


class ScopeController(Controller):
    path = "/v1/agents"
    tags = ["scope honesty"]  # noqa: RUF012 - Litestar class attribute

    @get("/{agent_id:str}/scope-honesty", operation_id="getScopeHonesty", responses=READ_PROBLEMS)
    async def scope_honesty(self, agent_id: FromPath[str], scope_honesty: Scope) -> ScopeHonesty:
        """The agent's scope-honesty score (SHS) with DA, FT, BA and TC (each with n; null with a reason
        when nothing was measured), tier, status and its history, per-capability pass rates, trend, the
        declaration history and the log indexes of every scope run."""
        return await scope_honesty.view(agent_id)

    @get(
        "/{agent_id:str}/scope-honesty/capabilities/{capability:str}",
        operation_id="getScopeCapability",
        responses=READ_PROBLEMS,
    )
    async def capability(
        self, agent_id: FromPath[str], capability: FromPath[str], scope_honesty: Scope
    ) -> CapabilityHistory:
        """One declared capability: its declaration now and its result in every scope run."""
        return await scope_honesty.capability(agent_id, capability)
