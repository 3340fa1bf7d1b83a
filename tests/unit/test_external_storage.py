"""External payload storage, unit level: every typed error, the reference, the cache, the drivers
(the S3 one against a real moto_server), and the Client's offload/resolve walk (issue 24)."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest

from sync_worker import errors, payloads
from sync_worker.external_storage import (
    EXTERNAL_PAYLOAD_REFERENCE_SCHEMA,
    ExternalPayloadCache,
    ExternalPayloadReference,
    LocalFilesystemExternalStorage,
    S3ExternalStorage,
    delete_external_payload,
    external_storage_envelope,
    fetch_external_payload,
    store_external_payload,
)
from sync_worker.external_storage.wire import PayloadOffload, UnresolvedReference

BLOB = payloads.encode(["x" * 5000])


@pytest.fixture
def local(tmp_path: Path) -> LocalFilesystemExternalStorage:
    return LocalFilesystemExternalStorage(tmp_path / "store")


def _stored(driver: Any, data: bytes = b"hello") -> ExternalPayloadReference:
    return store_external_payload(driver, data, codec="avro")


# -- the reference ---------------------------------------------------------------------------


def test_the_reference_round_trips_the_sdk_wire_form(local: LocalFilesystemExternalStorage) -> None:
    ref = _stored(local, b"abc")
    wire = ref.to_dict()
    assert wire == {"schema": EXTERNAL_PAYLOAD_REFERENCE_SCHEMA, "uri": ref.uri,
                    "sha256": hashlib.sha256(b"abc").hexdigest(), "size_bytes": 3, "codec": "avro"}
    assert ExternalPayloadReference.from_dict(wire) == ref
    assert ref.uri.startswith("file://") and ref.uri.endswith(f"/avro/{ref.sha256[:2]}/{ref.sha256}")


@pytest.mark.parametrize("change", [
    {"schema": "other.v1"}, {"codec": "json"}, {"sha256": "zz"}, {"size_bytes": -1}, {"size_bytes": "3"},
    {"uri": ""}, {"expires_at": "tomorrow"}, {"expires_at": "2030-01-01T00:00:00"},
])
def test_a_malformed_reference_is_unsupported(change: Dict[str, Any]) -> None:
    wire = {"schema": EXTERNAL_PAYLOAD_REFERENCE_SCHEMA, "uri": "file:///x", "sha256": "a" * 64,
            "size_bytes": 3, "codec": "avro", **change}
    with pytest.raises(errors.ExternalPayloadUnsupported) as caught:
        ExternalPayloadReference.from_dict(wire)
    assert caught.value.reason == "external_payload_unsupported"
    assert isinstance(caught.value, ValueError)  # as the SDK's ValueError refusals


# -- every error type --------------------------------------------------------------------------


def test_missing_is_not_found(local: LocalFilesystemExternalStorage) -> None:
    ref = _stored(local)
    delete_external_payload(local, ref)
    with pytest.raises(errors.ExternalPayloadNotFound) as caught:
        fetch_external_payload(local, ref)
    assert caught.value.reason == "external_payload_not_found" and caught.value.uri == ref.uri
    assert caught.value.retryable is False
    delete_external_payload(local, ref)  # deleting a missing object is fine


def test_tampered_bytes_are_an_integrity_error(local: LocalFilesystemExternalStorage) -> None:
    ref = _stored(local, b"hello")
    Path(ref.uri[len("file://"):]).write_bytes(b"jello")  # same size, other bytes
    with pytest.raises(errors.ExternalPayloadIntegrityError) as caught:
        fetch_external_payload(local, ref)
    assert isinstance(caught.value, errors.ExternalPayloadIntegrityMismatch)
    assert caught.value.reason == "external_payload_integrity_mismatch" and "sha256" in str(caught.value)
    Path(ref.uri[len("file://"):]).write_bytes(b"hello!")  # other size
    with pytest.raises(errors.ExternalPayloadIntegrityMismatch, match="6 bytes"):
        fetch_external_payload(local, ref)


def test_an_expired_reference_is_refused_before_any_fetch(local: LocalFilesystemExternalStorage) -> None:
    past = (datetime.now(timezone.utc) - timedelta(seconds=1)).isoformat().replace("+00:00", "Z")
    ref = store_external_payload(local, b"old", expires_at=past)
    with pytest.raises(errors.ExternalPayloadExpired) as caught:
        fetch_external_payload(local, ref)
    assert caught.value.reason == "external_payload_expired"
    future = (datetime.now(timezone.utc) + timedelta(hours=1)).isoformat()
    assert fetch_external_payload(local, store_external_payload(local, b"new", expires_at=future)) == b"new"


def test_an_object_larger_than_the_caller_allows_is_oversized(local: LocalFilesystemExternalStorage) -> None:
    ref = _stored(local, b"x" * 100)
    with pytest.raises(errors.ExternalPayloadOversized) as caught:
        fetch_external_payload(local, ref, max_bytes=99)
    assert caught.value.reason == "external_payload_oversized"


def test_an_unreadable_object_is_unavailable_or_unauthorized(local: LocalFilesystemExternalStorage) -> None:
    ref = _stored(local)
    path = Path(ref.uri[len("file://"):])
    path.unlink()
    path.mkdir()  # a directory where the object was: the read fails with an OSError
    with pytest.raises(errors.ExternalPayloadUnavailable) as caught:
        fetch_external_payload(local, ref)
    assert caught.value.reason == "external_payload_unavailable" and caught.value.retryable

    class Denied(Exception):
        response = {"Error": {"Code": "AccessDenied"}}

    class DeniedS3:
        def get_object(self, **kwargs: Any) -> Any:
            raise Denied("denied")

    ref3 = ExternalPayloadReference(uri="s3://b/avro/aa/" + "a" * 64, sha256="a" * 64, size_bytes=1)
    with pytest.raises(errors.ExternalPayloadUnauthorized) as denied:
        fetch_external_payload(S3ExternalStorage(DeniedS3(), bucket="b"), ref3)
    assert denied.value.reason == "external_payload_unauthorized"


def test_refusals_of_a_driver_map_to_unauthorized_and_unavailable() -> None:
    class Broken:
        def __init__(self, exc: BaseException) -> None:
            self.exc = exc

        def put(self, data: bytes, *, sha256: str, codec: str) -> str:
            raise self.exc

        def get(self, uri: str) -> bytes:
            raise self.exc

        def delete(self, uri: str) -> None:
            raise self.exc

    with pytest.raises(errors.ExternalPayloadUnavailable) as caught:
        store_external_payload(Broken(ConnectionError("down")), b"x")
    assert caught.value.retryable is True and caught.value.reason == "external_payload_unavailable"
    with pytest.raises(errors.ExternalPayloadUnauthorized):
        store_external_payload(Broken(PermissionError("no")), b"x")
    ref = ExternalPayloadReference(uri="mem://x", sha256="a" * 64, size_bytes=1)
    with pytest.raises(errors.ExternalPayloadUnavailable):
        fetch_external_payload(Broken(TimeoutError("slow")), ref)
    with pytest.raises(errors.ExternalPayloadNotFound):
        fetch_external_payload(Broken(KeyError("x")), ref)
    with pytest.raises(errors.ExternalPayloadUnauthorized):
        fetch_external_payload(Broken(PermissionError("no")), ref)


def test_the_error_hierarchy_and_names() -> None:
    for cls in (errors.ExternalPayloadNotFound, errors.ExternalPayloadExpired, errors.ExternalPayloadUnauthorized,
                errors.ExternalPayloadUnavailable, errors.ExternalPayloadOversized, errors.ExternalPayloadUnsupported,
                errors.ExternalPayloadIntegrityMismatch, errors.ExternalPayloadIntegrityError):
        assert issubclass(cls, errors.ExternalPayloadError) and issubclass(cls, errors.PayloadError)
        assert cls.__module__ == "sync_worker.errors"
        error = cls("boom", uri="u")
        twin = error.copy()
        assert type(twin) is cls and str(twin) == "boom" and twin.uri == "u" and twin.reason == error.reason


def test_a_uri_outside_the_root_or_of_another_scheme_is_refused(local: LocalFilesystemExternalStorage,
                                                               tmp_path: Path) -> None:
    outside = tmp_path / "secret"
    outside.write_bytes(b"x")
    for uri in (outside.as_uri(), "s3://bucket/key", (local.root / ".." / "secret").as_uri()):
        with pytest.raises(errors.ExternalPayloadUnsupported):
            local.get(uri)


# -- the cache ---------------------------------------------------------------------------------


def test_the_cache_serves_verified_bytes_and_stays_bounded(local: LocalFilesystemExternalStorage) -> None:
    cache = ExternalPayloadCache(max_entries=2, max_bytes=10)
    refs = [_stored(local, bytes([i]) * 4) for i in range(3)]
    for ref in refs:
        fetch_external_payload(local, ref, cache=cache)
    assert len(cache) == 2 and cache.current_bytes == 8 and cache.get(refs[0]) is None
    delete_external_payload(local, refs[2], cache=cache)
    assert cache.get(refs[2]) is None and len(cache) == 1
    big = _stored(local, b"z" * 11)
    fetch_external_payload(local, big, cache=cache)
    assert cache.get(big) is None  # larger than max_bytes: never cached
    # a hit needs no driver read
    fetch_external_payload(local, refs[1], cache=cache)
    Path(refs[1].uri[len("file://"):]).unlink()
    assert fetch_external_payload(local, refs[1], cache=cache) == bytes([1]) * 4
    with pytest.raises(ValueError):
        ExternalPayloadCache(max_entries=0)


# -- envelopes and the Client's walk -----------------------------------------------------------


def test_external_storage_envelope_offloads_only_over_the_threshold(local: LocalFilesystemExternalStorage) -> None:
    small = external_storage_envelope("hi", external_storage=local, threshold_bytes=1000)
    assert set(small) == {"codec", "blob"}
    big = external_storage_envelope("x" * 2000, external_storage=local, threshold_bytes=1000)
    assert set(big) == {"codec", "external_storage"} and big["codec"] == "avro"
    data = fetch_external_payload(local, ExternalPayloadReference.from_dict(big["external_storage"]))
    assert payloads.decode(data.decode()) == "x" * 2000  # the stored bytes are the blob text, as the SDK's


def test_the_walk_offloads_commands_and_resolves_answers(local: LocalFilesystemExternalStorage) -> None:
    offload = PayloadOffload(local, 1000)
    env = {"codec": "avro", "blob": BLOB}
    body = {"commands": [{"type": "complete_workflow", "result": env},
                         {"type": "upsert_memo", "entries": env}], "memo": env, "small": payloads.envelope(1)}
    out = offload.outbound(body)
    assert "external_storage" in out["commands"][0]["result"]
    assert out["commands"][1]["entries"] is env and out["memo"] is env and out["small"] == body["small"]
    assert body["commands"][0]["result"] is env  # the caller's body is never changed
    assert offload.inbound(out) == body
    assert PayloadOffload(local, None).outbound(body) is body  # no threshold: read-only


def test_an_unreadable_reference_in_a_worker_answer_raises_where_it_is_decoded(
    local: LocalFilesystemExternalStorage,
) -> None:
    offload = PayloadOffload(local, 10)
    out = offload.outbound({"arguments": {"codec": "avro", "blob": BLOB}})
    Path(out["arguments"]["external_storage"]["uri"][len("file://"):]).unlink()
    offload.cache.clear()
    with pytest.raises(errors.ExternalPayloadNotFound):
        offload.inbound(out)  # a control-plane answer: at once
    deferred = offload.inbound(out, defer_errors=True)
    assert isinstance(deferred["arguments"], UnresolvedReference)
    with pytest.raises(errors.ExternalPayloadNotFound):
        payloads.decode_arguments(deferred["arguments"])
    with pytest.raises(errors.ExternalPayloadUnsupported, match="no external_storage driver"):
        payloads.decode_envelope(dict(out["arguments"]))


def test_client_and_worker_take_the_sdk_keywords(local: LocalFilesystemExternalStorage) -> None:
    from sync_worker import Client
    from sync_worker.worker.worker import with_external_storage

    client = Client("http://127.0.0.1:9", external_storage=local, external_storage_threshold_bytes=5)
    assert client.external_storage is local and client.external_storage_threshold_bytes == 5
    twin = client.clone()
    assert twin.external_storage is local and twin.external_storage_cache is client.external_storage_cache
    worker_client = with_external_storage(Client("http://127.0.0.1:9"), local, 7, None)
    assert worker_client.external_storage is local and worker_client.external_storage_threshold_bytes == 7
    with pytest.raises(ValueError):
        Client("http://127.0.0.1:9", external_storage_threshold_bytes=5)
    with pytest.raises(ValueError):
        Client("http://127.0.0.1:9", external_storage=local, external_storage_threshold_bytes=0)


# -- S3 against moto_server --------------------------------------------------------------------


@pytest.fixture(scope="module")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from tests.interop._nestjs_harness import MotoServer, moto_available

    if not moto_available():
        pytest.fail("boto3 and moto[server] are part of the dev extra")
    server = MotoServer(tmp_path_factory.mktemp("moto"))
    try:
        yield server.endpoint
    finally:
        server.stop()


@pytest.fixture
def s3(s3_endpoint: str) -> Any:
    import boto3

    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1", aws_access_key_id="testing",
                          aws_secret_access_key="testing")
    client.create_bucket(Bucket="payloads")
    return client


def test_s3_round_trip_and_typed_errors_against_moto(s3: Any, s3_endpoint: str) -> None:
    driver = S3ExternalStorage(s3, bucket="payloads", prefix="/team/a/")
    ref = store_external_payload(driver, b"big bytes")
    assert ref.uri == f"s3://payloads/team/a/avro/{ref.sha256[:2]}/{ref.sha256}"
    head = s3.head_object(Bucket="payloads", Key=ref.uri[len("s3://payloads/"):])
    assert head["Metadata"] == {"sha256": ref.sha256, "codec": "avro"}
    assert fetch_external_payload(driver, ref) == b"big bytes"
    s3.put_object(Bucket="payloads", Key=ref.uri[len("s3://payloads/"):], Body=b"bad bytes")
    with pytest.raises(errors.ExternalPayloadIntegrityError):
        fetch_external_payload(driver, ref)
    delete_external_payload(driver, ref)
    with pytest.raises(errors.ExternalPayloadNotFound):
        fetch_external_payload(driver, ref)
    delete_external_payload(driver, ref)  # a missing object is fine
    with pytest.raises(errors.ExternalPayloadUnsupported):
        driver.get("s3://other/team/a/avro/aa/" + "a" * 64)
    with pytest.raises(errors.ExternalPayloadUnsupported):
        driver.get("s3://payloads/elsewhere/avro/aa/" + "a" * 64)
    # no client given: boto3 builds one from the keywords (the s3 extra)
    built = S3ExternalStorage(bucket="payloads", endpoint_url=s3_endpoint, region_name="us-east-1",
                              aws_access_key_id="testing", aws_secret_access_key="testing")
    assert fetch_external_payload(built, store_external_payload(built, b"again")) == b"again"
    missing_bucket = S3ExternalStorage(s3, bucket="nope")
    with pytest.raises(errors.ExternalPayloadNotFound):
        store_external_payload(missing_bucket, b"x")


def test_a_large_update_rejection_batch_is_offloaded_before_the_failure_bound(
    local: LocalFilesystemExternalStorage,
) -> None:
    import json

    import responses

    from sync_worker import Client

    client = Client("http://dw.test", external_storage=local, external_storage_threshold_bytes=64 * 1024,
                    worker_plane_transport="requests", control_plane_transport="requests")
    big = payloads.envelope("y" * (3 * 1024 * 1024))
    message = "the update was refused: " + "why " * 200
    with responses.RequestsMock() as mock:
        mock.post("http://dw.test/api/worker/workflow-tasks/t1/complete", json={"outcome": "completed"})
        client.complete_workflow_task("t1", lease_owner="w", workflow_task_attempt=1, commands=[
            {"type": "schedule_activity", "activity_type": "a", "arguments": big, "queue": "q"},
            {"type": "fail_update", "update_id": "u1", "message": message, "exception_class": "ValueError"},
        ])
        sent = json.loads(mock.calls[0].request.body)
    assert set(sent["commands"][0]["arguments"]) == {"codec", "external_storage"}
    assert sent["commands"][1]["message"] == message  # not squeezed to make room for the 3 MiB blob


def test_client_options_take_a_driver_or_a_uri_from_the_environment_and_workers_inherit_it(tmp_path: Path) -> None:
    from sync_worker.host import ClientOptions, OptionsError, WorkerOptions

    root = tmp_path / "env-store"
    options = ClientOptions.from_env({"SYNC_WORKER_EXTERNAL_STORAGE": root.as_uri(),
                                      "SYNC_WORKER_EXTERNAL_STORAGE_THRESHOLD_BYTES": "4096",
                                      "DURABLE_WORKFLOW_SERVER_URL": "http://127.0.0.1:9"})
    assert isinstance(options.external_storage, LocalFilesystemExternalStorage)
    assert options.external_storage.root == root.resolve() and options.external_storage_threshold_bytes == 4096
    client = options.build_client()
    assert client.external_storage is options.external_storage and client.external_storage_threshold_bytes == 4096
    worker = WorkerOptions(task_queue="q").build(client)
    assert worker.external_storage is options.external_storage and worker.client is client  # inherited, not cloned
    other = LocalFilesystemExternalStorage(tmp_path / "other")
    own = WorkerOptions.from_kwargs(task_queue="q", external_storage=other).build(client)
    assert own.external_storage is other and own.external_storage_threshold_bytes == 4096 and own.client is not client
    s3 = ClientOptions.from_mapping({"EXTERNAL_STORAGE": "s3://bucket/some/prefix"}).external_storage
    assert isinstance(s3, S3ExternalStorage) and (s3.bucket, s3.prefix) == ("bucket", "some/prefix")
    with pytest.raises(OptionsError):
        ClientOptions.from_mapping({"EXTERNAL_STORAGE": "gs://bucket"})
    with pytest.raises(OptionsError):
        WorkerOptions.from_kwargs(external_storage=object())


def test_a_namespace_policy_builds_its_driver(tmp_path: Path) -> None:
    from sync_worker import (
        AzureBlobExternalStorage,
        ExternalPayloadStoragePolicy,
        GCSExternalStorage,
        external_storage_driver_from_policy,
    )

    namespace = {"name": "billing", "external_payload_storage": {
        "driver": "local", "threshold_bytes": 1024, "config": {"uri": (tmp_path / "ns").as_uri()}}}
    policy = ExternalPayloadStoragePolicy.from_dict(namespace)
    assert policy.enabled and policy.threshold_bytes == 1024 and policy.integrity_required
    local = external_storage_driver_from_policy(policy)
    assert isinstance(local, LocalFilesystemExternalStorage) and local.root == (tmp_path / "ns").resolve()
    s3 = external_storage_driver_from_policy({"driver": "s3", "reference": "arn:aws:s3:::bucket-a/x",
                                              "config": {"prefix": "p/q"}}, s3_client=object())
    assert isinstance(s3, S3ExternalStorage) and (s3.bucket, s3.prefix) == ("bucket-a", "p/q")
    gcs = external_storage_driver_from_policy({"driver": "gcs", "reference": "projects/_/buckets/gb"},
                                              gcs_client=object())
    assert isinstance(gcs, GCSExternalStorage) and gcs.bucket == "gb"
    azure = external_storage_driver_from_policy({"driver": "azure-blob", "config": {"container": "c1"}},
                                                azure_container_client=object())
    assert isinstance(azure, AzureBlobExternalStorage) and azure.container == "c1"
    for bad, kwargs in [({"driver": "local", "enabled": False}, {}), ({"enabled": True}, {}),
                        ({"driver": "gcs", "config": {"bucket": "b"}}, {}), ({"driver": "ftp"}, {}),
                        ({"driver": "local"}, {}), ({"driver": "s3"}, {"s3_client": object()})]:
        with pytest.raises(ValueError):
            external_storage_driver_from_policy(bad, **kwargs)
    for malformed in ([], {"driver": 3}, {"driver": "s3", "threshold_bytes": 0}, {"external_payload_storage": 1},
                      {"driver": "s3", "enabled": "yes"}, {"driver": "s3", "config": []}):
        with pytest.raises(ValueError):
            ExternalPayloadStoragePolicy.from_dict(malformed)


def test_storing_the_same_bytes_again_keeps_an_intact_copy_and_repairs_a_damaged_one(
    local: LocalFilesystemExternalStorage,
) -> None:
    ref = _stored(local, b"same bytes")
    path = Path(ref.uri[len("file://"):])
    before = path.stat().st_ino
    assert _stored(local, b"same bytes") == ref and path.stat().st_ino == before  # not rewritten
    path.write_bytes(b"same bytez")  # damaged in place, same size
    assert _stored(local, b"same bytes") == ref
    assert fetch_external_payload(local, ref) == b"same bytes"  # written again


def test_only_exact_reference_envelopes_are_resolved(local: LocalFilesystemExternalStorage) -> None:
    offload = PayloadOffload(local, 10)
    policy_like = {"external_storage": {"driver": "s3", "bucket": "b"}}  # not a payload: left alone
    assert offload.inbound({"namespace": policy_like}) == {"namespace": policy_like}
    three = {"codec": "avro", "external_storage": {}, "extra": 1}
    assert offload.inbound([three]) == [three]
