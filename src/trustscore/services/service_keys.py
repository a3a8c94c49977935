"""The server's own signing key for evidence and snapshots, registered in the log under the log key.

The keys live in the data directory beside the log key: ``service.key`` (grader, snapshot) and
``reverify.key`` (re-verification). Its service card is co-signed by the log key,
so anyone holding only the log's verifier key can tell which graded evidence and snapshots are the
server's (docs/evidence-mapping.md).
"""

from __future__ import annotations

import msgspec

from trustscore.kinds.service_card import ServiceRole, make_service_card
from trustscore.ledger import dsse
from trustscore.ledger.keys import SigningKey
from trustscore.ledger.submission import prepare
from trustscore.services.log import LogService

SERVICE_ROLES: list[ServiceRole] = ["grader", "snapshot"]
REVERIFY_ROLES: list[ServiceRole] = ["reverify"]


async def register(
    log: LogService,
    service_key: SigningKey,
    name: str = "trustscore service",
    roles: list[ServiceRole] = SERVICE_ROLES,
) -> int:
    """Ensure ``service_key``'s card is in the log; return the index of the entry that registered it."""
    found = await log.store.key_entry(service_key.id)
    if found is not None:
        return found[1]
    payload = make_service_card(service_key.public_key, name, list(roles))
    envelope = dsse.sign(payload, [service_key, log.log_key])
    [appended] = await log.append([prepare(msgspec.to_builtins(envelope))], batch=False)
    return appended.index
