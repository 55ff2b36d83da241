"""DescribeUserScramCredentials (key 50): which users have SCRAM credentials, per mechanism.

Behavior:
- Answered from this broker's metadata image: each user's mechanisms and iteration counts
  (never salts or keys). No users named (null): every user with a credential, sorted. Named
  users without one: RESOURCE_NOT_FOUND "Attempt to describe a user credential that does not
  exist"; a user named twice: DUPLICATE_RESOURCE for that user, as Kafka answers.

Version notes: v0 only (flexible).
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from strom.wire.errors import ErrorCode
from strom.wire.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 50
MIN_VERSION = 0
MAX_VERSION = 0

Result = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
Info = DescribeUserScramCredentialsResponse.CredentialInfo


async def handle(
    broker: BrokerState, request: RequestContext, body: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    credentials = broker.image.scram_credentials
    by_user: dict[str, list[Info]] = {}
    for (user, mechanism), credential in sorted(credentials.items()):
        by_user.setdefault(user, []).append(Info(mechanism, credential.iterations))
    if not body.users:  # null or empty: every user
        results = [Result(user, ErrorCode.NONE, None, infos) for user, infos in sorted(by_user.items())]
        return DescribeUserScramCredentialsResponse(results=results)
    names = [u.name for u in body.users]
    counts = Counter(names)
    results = []
    for name in dict.fromkeys(names):
        if counts[name] > 1:
            results.append(Result(name, ErrorCode.DUPLICATE_RESOURCE,
                                  f"Cannot describe SCRAM credentials for the same user twice in a single request: {name}", []))  # fmt: skip
        elif name not in by_user:
            results.append(Result(name, ErrorCode.RESOURCE_NOT_FOUND,
                                  f"Attempt to describe a user credential that does not exist: {name}", []))  # fmt: skip
        else:
            results.append(Result(name, ErrorCode.NONE, None, by_user[name]))
    return DescribeUserScramCredentialsResponse(results=results)
