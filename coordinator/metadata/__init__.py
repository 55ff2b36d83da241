"""KRaft-style cluster metadata: the image, its records, and their encodings. Pure.

`image` and `delta`: records in, immutable image out. `metadata_records` frames one record;
`raft_entries` turns records and images into the Raft log's entries and snapshot data;
`kraft_checkpoint` is KRaft's checkpoint format (`bootstrap.checkpoint`); `single_node_log`
reads the metadata log older Strom versions kept on a single node, to migrate it. Nothing here
touches a file: bytes come in and go out (the files are `strom.storage`'s). See
docs/metadata.md.
"""

from strom.coordinator.metadata.delta import MetadataDelta
from strom.coordinator.metadata.image import (
    BROKER_RESOURCE,
    GROUP_RESOURCE,
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
    "GROUP_RESOURCE",
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
