"""KRaft-style cluster metadata: the image, its records, the log and snapshots.

`image` and `delta` are pure (records in, immutable image out); `log`,
`snapshot` and `properties` are the blocking file I/O the controller driver
runs in worker threads. See docs/metadata.md.
"""

from strom.coordinator.metadata.delta import MetadataDelta
from strom.coordinator.metadata.image import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    BrokerEndpoint,
    BrokerRegistration,
    MetadataImage,
    PartitionImage,
    Provenance,
    TopicImage,
)
from strom.coordinator.metadata.metadata_records import (
    MetadataBatch,
    MetadataError,
    decode_record,
    encode_record,
)

__all__ = [
    "BROKER_RESOURCE",
    "TOPIC_RESOURCE",
    "BrokerEndpoint",
    "BrokerRegistration",
    "MetadataBatch",
    "MetadataDelta",
    "MetadataError",
    "MetadataImage",
    "PartitionImage",
    "Provenance",
    "TopicImage",
    "decode_record",
    "encode_record",
]
