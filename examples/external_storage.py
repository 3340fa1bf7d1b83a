"""Large payloads through external storage: a 2 MiB document in, a 2 MiB report out.

    python examples/external_storage.py                      # local directory, embedded dev server
    python examples/external_storage.py --dir /mnt/shared    # a directory every worker host mounts
    python examples/external_storage.py --s3-bucket NAME     # S3 (pip install "sync-worker[s3]")
    python examples/external_storage.py --server-url URL

Payloads whose encoded blob is over ``--threshold`` bytes are written to the store and travel
as ``{codec, external_storage: {uri, sha256, size_bytes, ...}}`` references; the server's
history stays small, and every reader checks the bytes against the sha256 (docs/external-storage.md).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import tempfile
import threading
from typing import Any, Iterator, Optional

from sync_worker import Client, LocalFilesystemExternalStorage, S3ExternalStorage, Worker, activity, workflow

QUEUE = "external-storage-example"


@activity.defn(name="docs.summarize")
def summarize(document: str) -> str:
    return document.upper()  # as big as its input: stored again on the way back


@workflow.defn(name="docs.process")
class Process:
    def run(self, ctx: Any, document: str) -> Any:
        report = yield ctx.schedule_activity("docs.summarize", [document])
        return {"input_sha256": hashlib.sha256(document.encode()).hexdigest(), "report": report}


@contextlib.contextmanager
def _server(url: Optional[str]) -> Iterator[str]:
    if url:
        yield url
        return
    from sync_worker.devserver import DevServer

    with DevServer(port=0, db=":memory:") as dev:
        yield dev.url


def main(argv: Optional[list] = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server-url")
    parser.add_argument("--dir", help="the shared payload directory (default: a temporary one)")
    parser.add_argument("--s3-bucket")
    parser.add_argument("--threshold", type=int, default=256 * 1024)
    parser.add_argument("--size", type=int, default=2 * 1024 * 1024)
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:
        if args.s3_bucket:
            storage: Any = S3ExternalStorage(bucket=args.s3_bucket, prefix="durable-payloads")
        else:
            root = args.dir or stack.enter_context(tempfile.TemporaryDirectory(prefix="payloads-"))
            storage = LocalFilesystemExternalStorage(root)
        url = stack.enter_context(_server(args.server_url))
        client = Client(url, external_storage=storage, external_storage_threshold_bytes=args.threshold)
        worker = Worker(client, task_queue=QUEUE, workflows=[Process], activities=[summarize], poll_timeout=2.0)
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        try:
            document = ("lorem ipsum " * (args.size // 12 + 1))[:args.size]
            handle = client.start_workflow("docs.process", document, task_queue=QUEUE)
            result = handle.result(timeout=120)
            run_id = client.describe_workflow(handle.workflow_id).run_id or ""
            raw = Client(url)  # no driver: sees what the server keeps
            history_bytes = len(json.dumps(list(raw.iter_history(handle.workflow_id, run_id))))
            raw.close()
        finally:
            worker.stop()
            thread.join(30)
            client.close()
    summary = {"payload_bytes": args.size, "report_ok": result["report"] == document.upper(),
               "history_json_bytes": history_bytes}
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
