"""Time the Avro Value codec: sync_worker.payloads vs the published SDK's serializer vs raw fastavro.

Run from the repository root::

    python bench/payload_codec.py [--repeat 7] [--min-time 0.05]

Each cell is the best of ``--repeat`` timings of a loop sized to run at least ``--min-time``
seconds, in microseconds per operation. "encode" is value -> base64 blob, "decode" is blob ->
value. The fastavro column is the floor a generic Avro library reaches on its own: the tagged
datum is built before timing (that tagging is part of the SDK column), the single-object header
and base64 are included, and decode stops at the tagged datum. Ratios are ours / theirs (below 1
means we are faster). The SDK and fastavro columns are skipped if those packages are absent.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from sync_worker import payloads  # noqa: E402

NAMESPACE = "durable_workflow.protocol."
HEADER = b"\xc3\x01" + bytes.fromhex(payloads.FINGERPRINT_HEX)


def fixtures_dir() -> Path:
    return Path(os.environ.get("SYNC_WORKER_FIXTURES", REPO_ROOT.parent / "shared" / "fixtures"))


def untag(value: Any) -> Any:
    """The benchmark corpus writes bytes as {"$avro_bytes": base64}."""
    if isinstance(value, dict):
        if set(value) == {"$avro_bytes"}:
            return base64.b64decode(value["$avro_bytes"], validate=True)
        return {key: untag(item) for key, item in value.items()}
    if isinstance(value, list):
        return [untag(item) for item in value]
    return value


def corpus() -> List[Tuple[str, Any]]:
    cases: List[Tuple[str, Any]] = []
    path = fixtures_dir() / "sdk-python" / "schema" / "avro-value-benchmark-v1.json"
    if path.is_file():
        document = json.loads(path.read_text(encoding="utf-8"))
        cases.append((f"fixture:{document.get('case', 'benchmark')}", untag(document["value"])))
    else:
        print(f"(benchmark fixture not found at {path}; set SYNC_WORKER_FIXTURES)", file=sys.stderr)
    order = {
        "order_id": "ord_01HZX3K9",
        "customer": {"id": 4821, "name": "Ada Lovelace", "vip": True},
        "lines": [{"sku": f"SKU-{index}", "qty": index % 3 + 1, "price": 9.99 + index} for index in range(10)],
        "total": 187.4,
        "note": None,
    }
    cases += [
        ("args:['world']", ["world"]),
        ("scalar:int", 42),
        ("order (10 lines)", order),
        ("1000 records", [{"id": index, "ok": index % 2 == 0, "score": index / 7} for index in range(1000)]),
        ("64 KiB string", "x" * 65536),
        ("64 KiB bytes", bytes(range(256)) * 256),
    ]
    return cases


def best_of(operation: Callable[[], object], repeat: int, min_time: float) -> float:
    """Best per-operation time in microseconds."""
    loops = 1
    while True:
        start = time.perf_counter()
        for _ in range(loops):
            operation()
        elapsed = time.perf_counter() - start
        if elapsed >= min_time:
            break
        loops *= 2 if elapsed <= 0 else max(2, min(10, int(min_time / elapsed) + 1))
    best = elapsed / loops
    for _ in range(repeat - 1):
        start = time.perf_counter()
        for _ in range(loops):
            operation()
        best = min(best, (time.perf_counter() - start) / loops)
    return best * 1e6


# ---------------------------------------------------------------------------
# Contenders: each returns (encode, decode) closures for one value, or None if unavailable


Contender = Callable[[Any], Tuple[Callable[[], object], Callable[[], object]]]


def ours(value: Any) -> Tuple[Callable[[], object], Callable[[], object]]:
    blob = payloads.encode(value)
    return (lambda: payloads.encode(value)), (lambda: payloads.decode(blob))


def sdk_contender() -> Optional[Contender]:
    try:
        from durable_workflow import serializer
    except ImportError:
        return None

    def sdk(value: Any) -> Tuple[Callable[[], object], Callable[[], object]]:
        blob = serializer.encode(value, size_warning=None)
        if blob != payloads.encode(value):
            raise SystemExit("the SDK and sync_worker disagree on the bytes; fix that before timing")
        return (lambda: serializer.encode(value, size_warning=None)), (lambda: serializer.decode(blob, codec="avro"))

    return sdk


def to_datum(value: Any) -> Dict[str, Any]:
    if value is None:
        return {"value": None}
    if isinstance(value, bool):
        return {"value": (NAMESPACE + "BooleanValue", {"boolean": value})}
    if isinstance(value, int):
        return {"value": (NAMESPACE + "LongValue", {"long": value})}
    if isinstance(value, float):
        return {"value": (NAMESPACE + "DoubleValue", {"double": value})}
    if isinstance(value, bytes):
        return {"value": (NAMESPACE + "BytesValue", {"bytes": value})}
    if isinstance(value, str):
        return {"value": (NAMESPACE + "StringValue", {"string": value})}
    if isinstance(value, list):
        return {"value": (NAMESPACE + "ArrayValue", {"items": [to_datum(item) for item in value]})}
    entries = {key: to_datum(item) for key, item in value.items()}
    return {"value": (NAMESPACE + "MapValue", {"entries": entries})}


def fastavro_contender() -> Optional[Contender]:
    try:
        import fastavro
    except ImportError:
        return None
    schema = fastavro.parse_schema(json.loads(payloads.SCHEMA_JSON))

    def raw(value: Any) -> Tuple[Callable[[], object], Callable[[], object]]:
        datum = to_datum(value)

        def encode() -> str:
            buffer = io.BytesIO()
            buffer.write(HEADER)
            fastavro.schemaless_writer(buffer, schema, datum)
            return base64.b64encode(buffer.getvalue()).decode("ascii")

        blob = encode()
        if blob != payloads.encode(value):
            raise SystemExit("fastavro and sync_worker disagree on the bytes; fix that before timing")

        def decode() -> object:
            data = base64.b64decode(blob, validate=True)
            if data[:10] != HEADER:
                raise ValueError("bad header")
            return fastavro.schemaless_reader(io.BytesIO(data[10:]), schema)

        return encode, decode

    return raw


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7, help="timings per cell; the best is reported")
    parser.add_argument("--min-time", type=float, default=0.05, help="seconds per timing loop")
    args = parser.parse_args(argv)

    contenders: List[Tuple[str, Contender]] = [("ours", ours)]
    for name, factory in (("sdk", sdk_contender), ("fastavro", fastavro_contender)):
        contender = factory()
        if contender is None:
            print(f"({name} not installed; column skipped)", file=sys.stderr)
        else:
            contenders.append((name, contender))

    columns = [name for name, _ in contenders]
    header = f"{'case':<20} {'op':<6} {'bytes':>7} " + " ".join(f"{name + ' µs':>12}" for name in columns)
    header += "".join(f" {'ours/' + name:>13}" for name in columns[1:])
    print(header)
    print("-" * len(header))
    for label, value in corpus():
        size = len(payloads.encode_bytes(value))
        pairs = [contender(value) for _, contender in contenders]
        for op_index, op in enumerate(("encode", "decode")):
            timings = [best_of(pair[op_index], args.repeat, args.min_time) for pair in pairs]
            row = f"{label:<20} {op:<6} {size:>7} " + " ".join(f"{timing:>12.2f}" for timing in timings)
            row += "".join(f" {timings[0] / timing:>13.2f}" for timing in timings[1:])
            print(row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
