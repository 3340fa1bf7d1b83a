"""The Google Cloud Storage driver against a real GCS emulator (``gcp-storage-emulator``, an HTTP
server in this process) through the real ``google-cloud-storage`` client (issue 24)."""

from __future__ import annotations

import socket
from typing import Any, Iterator

import pytest

from sync_worker import GCSExternalStorage, errors
from sync_worker.external_storage import delete_external_payload, fetch_external_payload, store_external_payload


@pytest.fixture(scope="module")
def gcs() -> Iterator[Any]:
    from gcp_storage_emulator.server import create_server
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = create_server("127.0.0.1", port, in_memory=True)
    server.start()
    try:
        client = storage.Client(project="test", credentials=AnonymousCredentials(),
                                client_options={"api_endpoint": f"http://127.0.0.1:{port}"})
        client.create_bucket("payloads")
        yield client
    finally:
        server.stop()


def test_gcs_round_trip_metadata_and_typed_errors(gcs: Any) -> None:
    driver = GCSExternalStorage(gcs, bucket="payloads", prefix="durable/")
    ref = store_external_payload(driver, b"large payload bytes")
    key = ref.uri[len("gs://payloads/"):]
    assert key == f"durable/avro/{ref.sha256[:2]}/{ref.sha256}"
    assert gcs.bucket("payloads").get_blob(key).metadata == {"sha256": ref.sha256, "codec": "avro"}
    assert fetch_external_payload(driver, ref) == b"large payload bytes"
    gcs.bucket("payloads").blob(key).upload_from_string(b"tampered payload!!!")
    with pytest.raises(errors.ExternalPayloadIntegrityError):
        fetch_external_payload(driver, ref)
    delete_external_payload(driver, ref)
    with pytest.raises(errors.ExternalPayloadNotFound) as missing:
        fetch_external_payload(driver, ref)
    assert missing.value.status == 404
    delete_external_payload(driver, ref)  # already gone: fine
    for uri in ("gs://other/durable/avro/aa/" + "a" * 64, "gs://payloads/elsewhere/avro/aa/" + "a" * 64,
                "s3://payloads/durable/x"):
        with pytest.raises(errors.ExternalPayloadUnsupported):
            driver.get(uri)
