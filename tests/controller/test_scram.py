"""SCRAM credentials in the metadata: AlterUserScramCredentials planned by the controller, the
records replayed into the image, kept by snapshots, and what a stored credential verifies."""

from __future__ import annotations

import hashlib

from strom.broker.security.scram import ScramClient, ScramServer, make_credential
from strom.coordinator.controller.scram import credential_records, scram_credential
from strom.coordinator.metadata.image import MetadataImage
from strom.coordinator.metadata.kraft_checkpoint import image_records
from strom.wire.formats.metadata.remove_user_scram_credential_record import (
    RemoveUserScramCredentialRecord,
)


def test_records_into_the_image_and_back_through_a_snapshot() -> None:
    salted = hashlib.pbkdf2_hmac("sha256", b"pw", b"salt", 4096)
    image = MetadataImage.EMPTY.apply_all(
        [credential_records("alice", 1, salted, b"salt", 4096),
         credential_records("alice", 2, salted * 2, b"salt", 8192),
         credential_records("bob", 1, salted, b"salt", 4096)]
    )  # fmt: skip
    assert image.scram_credential("alice", 1) == scram_credential(1, salted, b"salt", 4096)
    assert set(image.scram_credentials) == {("alice", 1), ("alice", 2), ("bob", 1)}
    rebuilt = MetadataImage.EMPTY.apply_all(image_records(image))
    assert rebuilt.scram_credentials == image.scram_credentials
    removed = image.apply(RemoveUserScramCredentialRecord("alice", 2))
    assert set(removed.scram_credentials) == {("alice", 1), ("bob", 1)}
    assert image.scram_credential("alice", 2) is not None  # images are immutable


def test_a_stored_credential_verifies_only_its_password() -> None:
    credential = make_credential("SCRAM-SHA-256", "right", 4096, b"0123456789abcdef")
    for password, ok in (("right", True), ("wrong", False)):
        server = ScramServer("SCRAM-SHA-256", lambda _user: credential)
        client = ScramClient("SCRAM-SHA-256", "alice", password)
        try:
            final = server.evaluate(client.final(server.evaluate(client.first())))
            client.check(final)
            assert ok
        except Exception:
            assert not ok
