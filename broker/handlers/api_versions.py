"""ApiVersions (key 18).

Behavior:
- Advertises exactly the handlers Strom implements for the request's listener (client or
  controller listener, as Kafka's ApiVersionManager per listener type), with their ranges.
- A request at a version newer than Strom knows is answered at v0 with
  UNSUPPORTED_VERSION and the full list, so the client can pick (KIP-511);
  the server does that before a handler runs (see broker.server).
- v3+: ClientSoftwareName/Version must match Kafka's pattern, else INVALID_REQUEST.
- v3+: the features, as a KRaft broker reports them: SupportedFeatures are the ranges this
  node registered with the controller, FinalizedFeatures the levels in the metadata image
  (min level = max level = the finalized level), and FinalizedFeaturesEpoch the image's last
  metadata offset (-1 before any). Admin#describeFeatures and `kafka-features.sh describe`
  read exactly these. Below v4 a supported range starting at 0 is reported from 1 (and one
  of only 0 is left out), as Kafka does: older clients refuse a minimum of 0 (KIP-1022).

Version notes: v1 adds ThrottleTimeMs; v3 is flexible and adds client software
fields and (tagged) features; the response header is always v0.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from strom.wire.errors import ErrorCode
from strom.wire.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 18
MIN_VERSION = 0
MAX_VERSION = 4

_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def supported_versions(
    error: ErrorCode = ErrorCode.NONE, listener_type: str = "broker"
) -> ApiVersionsResponse:
    """The response body listing every API key and version range a listener type serves."""
    from strom.broker.handlers import HANDLERS

    keys = [
        ApiVersionsResponse.ApiVersion(h.api_key, h.advertised_min_version, h.max_version)
        for h in sorted(HANDLERS.values(), key=lambda h: h.api_key)
        if h.serves(listener_type)
    ]
    return ApiVersionsResponse(error_code=error, api_keys=keys)


async def handle(
    broker: BrokerState, request: RequestContext, body: ApiVersionsRequest
) -> ApiVersionsResponse:
    if request.api_version >= 3 and not (
        _SOFTWARE.fullmatch(body.client_software_name)
        and _SOFTWARE.fullmatch(body.client_software_version)
    ):
        return ApiVersionsResponse(error_code=ErrorCode.INVALID_REQUEST)
    from strom.broker.handlers import listener_type

    response = supported_versions(
        listener_type=listener_type(request.listener in broker.config.controller_listeners)
    )
    if request.api_version >= 3:
        image = broker.image
        registration = image.broker(broker.node_id)
        old = request.api_version < 4  # clients before KIP-1022 refuse a minimum of 0
        response.supported_features = [
            ApiVersionsResponse.SupportedFeatureKey(name, max(low, 1) if old else low, high)
            for name, low, high in sorted(registration.features if registration else ())
            if high > 0 or not old
        ]
        response.finalized_features = [
            ApiVersionsResponse.FinalizedFeatureKey(name, level, level)
            for name, level in sorted(image.features.items())
        ]
        response.finalized_features_epoch = image.provenance.offset
    return response
