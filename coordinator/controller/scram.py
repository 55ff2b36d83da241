"""AlterUserScramCredentials (API 51): SCRAM credentials into the metadata log.

The client (kafka-configs --alter --add-config 'SCRAM-SHA-256=[password=...]') salts the
password itself and sends the salted password, the salt and the iteration count; the controller
derives what the broker stores (`scram_credential`: StoredKey and ServerKey, never the salted
password) and writes one UserScramCredentialRecord per upsertion and one
RemoveUserScramCredentialRecord per deletion.

Checks, per user, as Kafka's ScramControlManager: an unknown mechanism is
UNSUPPORTED_SASL_MECHANISM; an empty name, an empty salt or salted password, or iterations
outside 4096-16384 UNACCEPTABLE_CREDENTIAL; the same user and mechanism twice in one request
DUPLICATE_RESOURCE; deleting a credential that does not exist RESOURCE_NOT_FOUND. A user with
any failed alteration gets none applied; results come one per user, in the order first named.
"""

from __future__ import annotations

import hashlib
import hmac
from collections import Counter

from strom.coordinator.controller.result import ApiError, Context, ControllerError, ControllerResult
from strom.coordinator.metadata.image import ScramCredential
from strom.wire.errors import ErrorCode
from strom.wire.formats.metadata.remove_user_scram_credential_record import (
    RemoveUserScramCredentialRecord,
)
from strom.wire.formats.metadata.user_scram_credential_record import UserScramCredentialRecord
from strom.wire.message import Message
from strom.wire.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
)

MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
"""SCRAM mechanism ids (the records' and the APIs') and names."""
HASHES = {1: "sha256", 2: "sha512"}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


def scram_credential(mechanism: int, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """What is stored for a salted password: StoredKey = H(HMAC(salted, "Client Key")) and
    ServerKey = HMAC(salted, "Server Key") (RFC 5802)."""
    name = HASHES[mechanism]
    client_key = hmac.digest(salted, b"Client Key", name)
    return ScramCredential(
        salt=salt,
        stored_key=hashlib.new(name, client_key).digest(),
        server_key=hmac.digest(salted, b"Server Key", name),
        iterations=iterations,
    )


def credential_records(
    user: str, mechanism: int, salted: bytes, salt: bytes, iterations: int
) -> UserScramCredentialRecord:
    c = scram_credential(mechanism, salted, salt, iterations)
    return UserScramCredentialRecord(user, mechanism, c.salt, c.stored_key, c.server_key, iterations)


def check_mechanism(mechanism: int) -> None:
    if mechanism not in MECHANISMS:
        raise ControllerError(ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")


def check_iterations(mechanism: int, iterations: int) -> None:
    if iterations < MIN_ITERATIONS:
        raise ControllerError(
            ErrorCode.UNACCEPTABLE_CREDENTIAL,
            f"Too few iterations for {MECHANISMS[mechanism]} (at least {MIN_ITERATIONS})",
        )
    if iterations > MAX_ITERATIONS:
        raise ControllerError(
            ErrorCode.UNACCEPTABLE_CREDENTIAL,
            f"Too many iterations for {MECHANISMS[mechanism]} (at most {MAX_ITERATIONS})",
        )


def alter_user_scram_credentials(
    ctx: Context, request: AlterUserScramCredentialsRequest
) -> ControllerResult[AlterUserScramCredentialsResponse]:
    named = Counter(
        [(d.name, d.mechanism) for d in request.deletions]
        + [(u.name, u.mechanism) for u in request.upsertions]
    )
    users = list(dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions]))
    errors: dict[str, ApiError] = {}
    planned: dict[str, list[Message]] = {user: [] for user in users}

    def fail(user: str, exc: ControllerError) -> None:
        errors.setdefault(user, exc.error)

    for deletion in request.deletions:
        try:
            _common(deletion.name, deletion.mechanism, named)
            if ctx.image.scram_credential(deletion.name, deletion.mechanism) is None:
                raise ControllerError(
                    ErrorCode.RESOURCE_NOT_FOUND,
                    "Attempt to delete a user credential that does not exist",
                )
            planned[deletion.name].append(
                RemoveUserScramCredentialRecord(deletion.name, deletion.mechanism)
            )
        except ControllerError as exc:
            fail(deletion.name, exc)
    for upsertion in request.upsertions:
        try:
            _common(upsertion.name, upsertion.mechanism, named)
            check_iterations(upsertion.mechanism, upsertion.iterations)
            if not upsertion.salt or not upsertion.salted_password:
                raise ControllerError(
                    ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty"
                )
            planned[upsertion.name].append(
                credential_records(
                    upsertion.name, upsertion.mechanism, upsertion.salted_password,
                    upsertion.salt, upsertion.iterations,
                )
            )  # fmt: skip
        except ControllerError as exc:
            fail(upsertion.name, exc)
    result = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult
    records = [r for user in users if user not in errors for r in planned[user]]
    response = AlterUserScramCredentialsResponse(
        results=[
            result(user, errors.get(user, ApiError(ErrorCode.NONE)).code,
                   errors.get(user, ApiError(ErrorCode.NONE)).message)
            for user in users
        ]
    )  # fmt: skip
    return ControllerResult(response, records)


def _common(user: str, mechanism: int, named: Counter[tuple[str, int]]) -> None:
    if not user:
        raise ControllerError(ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
    check_mechanism(mechanism)
    if named[(user, mechanism)] > 1:
        raise ControllerError(
            ErrorCode.DUPLICATE_RESOURCE,
            "A user credential cannot be altered twice in the same request",
        )
