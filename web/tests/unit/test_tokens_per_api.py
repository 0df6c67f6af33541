"""The web is a token issuer: one short-lived token per API, each for that API's audience only,
and each API call carries the token of its own API (an agent call never carries one that could
approve). Calls are captured with an injected transport."""

from __future__ import annotations

import json
from types import SimpleNamespace

import httpx
import jwt
from pydantic import SecretStr
from signoff_contracts.operations import Membership
from signoff_runtime import keys
from signoff_runtime.settings import AuthSettings
from signoff_runtime.tokens import AGENT_AUDIENCE, PROPOSALS_AUDIENCE, verify_token
from signoff_web import context, sessions
from signoff_web.apis import Apis
from signoff_web.settings import WebSettings

MEMBER = Membership(user_id="usr_1", organization_id="org_1", role="manager", locale="en")


def _request(settings: WebSettings) -> SimpleNamespace:
    return SimpleNamespace(app=SimpleNamespace(state=SimpleNamespace(settings=settings)))


def _audience(token: str) -> object:
    return jwt.decode(token, options={"verify_signature": False})["aud"]


def test_each_api_gets_a_token_of_its_own_audience_signed_by_the_webs_key() -> None:
    kid, private, public = keys.generate()
    settings = WebSettings(auth={"private_key": SecretStr(private), "key_id": kid})
    who = sessions.Session.start(MEMBER, 60)
    tokens = context.tokens(_request(settings), who)  # type: ignore[arg-type]

    assert _audience(tokens.agent) == AGENT_AUDIENCE
    assert _audience(tokens.proposals) == PROPOSALS_AUDIENCE
    services = AuthSettings(public_keys={kid: public})
    claims = verify_token(services, tokens.proposals, audience=PROPOSALS_AUDIENCE)
    assert (claims.sub, claims.org) == ("usr_1", "org_1")
    assert tokens.agent is tokens.agent  # minted once per request


async def test_each_call_carries_its_own_apis_token() -> None:
    seen: list[tuple[str, str]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        token = request.headers["authorization"].removeprefix("Bearer ")
        seen.append((request.url.host, str(_audience(token))))
        body = {"items": [], "id": "cnv_1", "messages": []}
        return httpx.Response(200, content=json.dumps(body))

    who = sessions.Session.start(MEMBER, 60)
    tokens = context.tokens(_request(WebSettings()), who)  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as http:
        apis = Apis(http, "http://agent", "http://proposals")
        await apis.open_conversation(tokens, "orders", "ord_1")
        await apis.conversation(tokens, "cnv_1")
        await apis.pending(tokens)
        await apis.proposal(tokens, "prp_1")
        await apis.pending_pauses(tokens)

    assert seen == [
        ("agent", AGENT_AUDIENCE),
        ("agent", AGENT_AUDIENCE),
        ("proposals", PROPOSALS_AUDIENCE),
        ("proposals", PROPOSALS_AUDIENCE),
        ("proposals", PROPOSALS_AUDIENCE),
    ]
