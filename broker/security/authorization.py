"""Authorization on the broker: who may do what, asked by the handlers and the dispatcher.

`BrokerAuthorizer` answers Kafka's StandardAuthorizer questions over the ACLs of the current
metadata image (`strom.coordinator.metadata.acls.Authorizer`, rebuilt when the ACLs change), with
`super.users` and `allow.everyone.if.no.acl.found` from the configuration. The principal is the
connection's (`RequestContext.principal`: `User:ANONYMOUS`, the SASL user or the certificate
name), the host its client address.

Which check each API makes is Kafka's (KafkaApis, ControllerApis, AuthHelper); see
docs/security.md for the table. Three kinds:

- `CLUSTER_CHECKS`: node-to-node APIs (Raft, registration, heartbeats, AlterPartition,
  producer id blocks: CLUSTER_ACTION) and cluster-wide admin APIs (ALTER or DESCRIBE on the
  cluster), checked by the dispatcher, which answers CLUSTER_AUTHORIZATION_FAILED in the
  response's top-level error code.
- `CHECKED_BY_HANDLER`: the handler checks each topic, group, transactional id or the cluster
  and answers the API's own error per item (TOPIC_AUTHORIZATION_FAILED, ...).
- Fail closed: any other API (one added later without its checks) is allowed to super users
  only while an authorizer is configured; ApiVersions and the SASL APIs need no permission.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from strom.broker.security.principal import KafkaPrincipal
from strom.config import BrokerConfig
from strom.coordinator.metadata.acls import (
    CLUSTER_NAME,
    AclOperation,
    Authorizer,
    ResourceType,
)

if TYPE_CHECKING:
    from strom.coordinator.metadata.image import MetadataImage


class Asker(Protocol):
    """Who asks: what a request context tells (`RequestContext`)."""

    @property
    def principal(self) -> KafkaPrincipal: ...

    @property
    def client_host(self) -> str: ...


class Authorizing(Protocol):
    """Where the answer comes from: the broker's authorizer and image (`BrokerState`)."""

    @property
    def authorizer(self) -> BrokerAuthorizer | None: ...

    @property
    def image(self) -> MetadataImage: ...

NOT_REQUESTED = -(2**31)
"""authorized_operations when the client did not ask for it (INT32_MIN)."""

EXEMPT_APIS = frozenset({18, 17, 36})
"""ApiVersions, SaslHandshake, SaslAuthenticate: answered without a permission."""
CLUSTER_CHECKS: dict[int, AclOperation] = {
    **dict.fromkeys((52, 53, 54, 56, 59, 62, 63, 67), AclOperation.CLUSTER_ACTION),
    35: AclOperation.DESCRIBE,  # DescribeLogDirs
    43: AclOperation.ALTER,  # ElectLeaders
    45: AclOperation.ALTER,  # AlterPartitionReassignments
    46: AclOperation.DESCRIBE,  # ListPartitionReassignments
    50: AclOperation.DESCRIBE,  # DescribeUserScramCredentials
    55: AclOperation.DESCRIBE,  # DescribeQuorum
}
"""APIs that need one permission on the cluster, checked by the dispatcher: the node-to-node
ones (Vote, BeginQuorumEpoch, EndQuorumEpoch, AlterPartition, FetchSnapshot,
BrokerRegistration, BrokerHeartbeat, AllocateProducerIds: CLUSTER_ACTION) and the cluster-wide
admin ones. A refusal is CLUSTER_AUTHORIZATION_FAILED in the response's top-level error code
(a version without one closes the connection)."""
CHECKED_BY_HANDLER = frozenset({
    0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29,
    30, 31, 32, 33, 37, 42, 44, 47, 48, 49, 51, 60, 61, 65, 66, 75,
})  # fmt: skip
"""APIs whose handlers make Kafka's checks themselves (DescribeCluster: none, as Kafka)."""


class BrokerAuthorizer:
    """StandardAuthorizer decisions for this broker (see the module docstring)."""

    def __init__(self, config: BrokerConfig) -> None:
        self.super_users = frozenset(
            p.strip() for p in config.super_users.split(";") if p.strip()
        )
        self.allow_if_no_acl = config.allow_everyone_if_no_acl_found
        self._image_acls: object = None
        self._authorizer = Authorizer((), self.super_users, self.allow_if_no_acl)

    def current(self, image: MetadataImage) -> Authorizer:
        if image.acls is not self._image_acls:
            self._authorizer = Authorizer(
                image.acls.values(), self.super_users, self.allow_if_no_acl
            )
            self._image_acls = image.acls
        return self._authorizer


def authorizer_of(broker: Authorizing) -> Authorizer | None:
    """The authorizer over the current ACLs, or None when none is configured."""
    if broker.authorizer is None:
        return None
    return broker.authorizer.current(broker.image)


def allowed(
    broker: Authorizing,
    request: Asker,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str = CLUSTER_NAME,
) -> bool:
    """Whether the request's principal may do `operation` on the resource (always, without an
    authorizer)."""
    authorizer = authorizer_of(broker)
    if authorizer is None:
        return True
    return authorizer.authorize(
        str(request.principal), request.client_host, operation, resource_type, name
    )


def allowed_on_some(
    broker: Authorizing, request: Asker, operation: AclOperation, resource_type: ResourceType
) -> bool:
    """Kafka's authorizeByResourceType: `operation` allowed on some resource of the type."""
    authorizer = authorizer_of(broker)
    if authorizer is None:
        return True
    return authorizer.authorize_any(str(request.principal), request.client_host, operation,
                                    resource_type)  # fmt: skip


def is_super_user(broker: Authorizing, request: Asker) -> bool:
    return broker.authorizer is None or str(request.principal) in broker.authorizer.super_users
