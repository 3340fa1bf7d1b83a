"""The Google Cloud Storage and Azure Blob drivers against real emulators, through the real clients:
``gcp-storage-emulator`` (an HTTP server in this process) with ``google-cloud-storage``, and Azurite
(npm, a child process) with ``azure-storage-blob`` (issue 24)."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from sync_worker import AzureBlobExternalStorage, GCSExternalStorage, errors
from sync_worker.external_storage import delete_external_payload, fetch_external_payload, store_external_payload


@pytest.fixture(scope="module")
def gcs() -> Iterator[Any]:
    create_server = pytest.importorskip(
        "gcp_storage_emulator.server",
        reason="gcp-storage-emulator and google-cloud-storage install on Python 3.10+ only (setup.cfg dev "
               "markers); the GCS driver is tested where they do").create_server
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


AZURITE = Path(__file__).resolve().parents[1] / "interop" / "azurite" / "node_modules" / ".bin" / "azurite-blob"
# Azurite's published development account (its documentation's well-known key, not a secret)
_AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


@pytest.fixture(scope="module")
def azure_container(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if not AZURITE.exists():
        pytest.skip("azurite is not installed: scripts/prepare (scripts/prepare.d/43-azurite.sh, npm ci)")
    from azure.storage.blob import BlobServiceClient

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = (tmp_path_factory.mktemp("azurite") / "azurite.log").open("w")
    proc = subprocess.Popen([str(AZURITE), "--blobHost", "127.0.0.1", "--blobPort", str(port),
                             "--inMemoryPersistence", "--skipApiVersionCheck"], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("azurite did not start") from None
                time.sleep(0.1)
        service = BlobServiceClient.from_connection_string(
            f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={_AZURITE_KEY};"
            f"BlobEndpoint=http://127.0.0.1:{port}/devstoreaccount1;")
        yield service.create_container("payloads")
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()


def test_azure_round_trip_metadata_and_typed_errors(azure_container: Any) -> None:
    driver = AzureBlobExternalStorage(azure_container, container="payloads", prefix="durable")
    ref = store_external_payload(driver, b"large payload bytes")
    key = ref.uri[len("azure-blob://payloads/"):]
    assert key == f"durable/avro/{ref.sha256[:2]}/{ref.sha256}"
    assert azure_container.get_blob_client(key).get_blob_properties().metadata == {"sha256": ref.sha256,
                                                                                   "codec": "avro"}
    assert fetch_external_payload(driver, ref) == b"large payload bytes"
    azure_container.upload_blob(name=key, data=b"tampered payload!!!", overwrite=True)
    with pytest.raises(errors.ExternalPayloadIntegrityError):
        fetch_external_payload(driver, ref)
    delete_external_payload(driver, ref)
    with pytest.raises(errors.ExternalPayloadNotFound) as missing:
        fetch_external_payload(driver, ref)
    assert missing.value.status == 404
    delete_external_payload(driver, ref)
    for uri in ("azure-blob://other/durable/avro/aa/" + "a" * 64, "gs://payloads/durable/x"):
        with pytest.raises(errors.ExternalPayloadUnsupported):
            driver.get(uri)
    denied = AzureBlobExternalStorage(
        type(azure_container).from_container_url(azure_container.url), container="payloads")  # no credential
    with pytest.raises(errors.ExternalPayloadUnauthorized):
        store_external_payload(denied, b"x")
