"""CreateAcls (API 30) and DeleteAcls (API 31): ACLs into and out of the metadata log.

As Kafka's AclControlManager: each creation is checked (`invalid_binding`: INVALID_REQUEST with
the reason) and becomes one AccessControlEntryRecord with a fresh id, unless an identical ACL
exists already (then nothing is written and the creation succeeds). Each DeleteAcls filter
removes every ACL it matches (RemoveAccessControlEntryRecord per ACL, an ACL matched by two
filters removed once) and answers the ACLs it matched; a filter that is invalid (UNKNOWN
types) fails alone with INVALID_REQUEST.
"""

from __future__ import annotations

from strom.coordinator.controller.result import Context, ControllerResult
from strom.coordinator.metadata.acls import (
    AclBinding,
    AclFilter,
    AclOperation,
    PatternType,
    Permission,
    ResourceType,
    invalid_binding,
)
from strom.wire.errors import ErrorCode
from strom.wire.formats.metadata.access_control_entry_record import AccessControlEntryRecord
from strom.wire.formats.metadata.remove_access_control_entry_record import (
    RemoveAccessControlEntryRecord,
)
from strom.wire.message import Message
from strom.wire.messages.create_acls import CreateAclsRequest, CreateAclsResponse
from strom.wire.messages.delete_acls import DeleteAclsRequest, DeleteAclsResponse

MAX_ACLS = 100_000
"""ACLs a cluster may hold (a bound on the metadata every broker keeps in memory)."""


def create_acls(ctx: Context, request: CreateAclsRequest) -> ControllerResult[CreateAclsResponse]:
    existing = set(ctx.image.acls.values())
    records: list[Message] = []
    results = []
    result = CreateAclsResponse.AclCreationResult
    for c in request.creations:
        acl = AclBinding(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal,
                         c.host, c.operation, c.permission_type)  # fmt: skip
        reason = invalid_binding(acl)
        if reason is not None:
            results.append(result(ErrorCode.INVALID_REQUEST, reason))
            continue
        if acl not in existing:
            if len(existing) >= MAX_ACLS:
                results.append(result(ErrorCode.INVALID_REQUEST,
                                      f"the cluster holds the maximum of {MAX_ACLS} ACLs"))  # fmt: skip
                continue
            existing.add(acl)
            records.append(AccessControlEntryRecord(
                ctx.new_uuid(), acl.resource_type, acl.resource_name, acl.pattern_type,
                acl.principal, acl.host, acl.operation, acl.permission,
            ))  # fmt: skip
        results.append(result(ErrorCode.NONE, None))
    return ControllerResult(CreateAclsResponse(results=results), records)


def acl_filter(f: DeleteAclsRequest.DeleteAclsFilter) -> AclFilter:
    return AclFilter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
                     f.principal_filter, f.host_filter, f.operation, f.permission_type)  # fmt: skip


def invalid_filter(f: AclFilter) -> str | None:
    """Why a filter can match nothing meaningful (INVALID_REQUEST), or None."""
    if f.resource_type not in {t.value for t in ResourceType} or f.resource_type == ResourceType.UNKNOWN:
        return "Invalid resource type filter"
    if f.pattern_type not in {t.value for t in PatternType} or f.pattern_type == PatternType.UNKNOWN:
        return "Invalid pattern type filter"
    if f.operation not in {o.value for o in AclOperation} or f.operation == AclOperation.UNKNOWN:
        return "Invalid operation filter"
    if f.permission not in {p.value for p in Permission} or f.permission == Permission.UNKNOWN:
        return "Invalid permission type filter"
    return None


def delete_acls(ctx: Context, request: DeleteAclsRequest) -> ControllerResult[DeleteAclsResponse]:
    removed: set[object] = set()
    records: list[Message] = []
    results = []
    for raw in request.filters:
        f = acl_filter(raw)
        reason = invalid_filter(f)
        if reason is not None:
            results.append(DeleteAclsResponse.DeleteAclsFilterResult(
                ErrorCode.INVALID_REQUEST, reason, []))  # fmt: skip
            continue
        matching = []
        for acl_id, acl in sorted(ctx.image.acls.items(), key=lambda kv: str(kv[0])):
            if not f.matches(acl):
                continue
            matching.append(DeleteAclsResponse.DeleteAclsMatchingAcl(
                ErrorCode.NONE, None, acl.resource_type, acl.resource_name, acl.pattern_type,
                acl.principal, acl.host, acl.operation, acl.permission,
            ))  # fmt: skip
            if acl_id not in removed:
                removed.add(acl_id)
                records.append(RemoveAccessControlEntryRecord(acl_id))
        results.append(DeleteAclsResponse.DeleteAclsFilterResult(ErrorCode.NONE, None, matching))
    return ControllerResult(DeleteAclsResponse(filter_results=results), records)
