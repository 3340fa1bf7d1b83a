"""One side of ``bench/prefork_cpu.py --celery``: N ``spin.delay(iterations)`` calls, then every
result; prints JSON. Stdlib only besides the app module named by ``--app``. The window ends when
the last task finished (each answers ``time.time()`` at its end), so how a client waits for
results (Redis pub/sub, or polling the server) does not count."""

import argparse
import importlib
import json
import sys
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--app", required=True)
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--iterations", type=int, required=True)
    parser.add_argument("--warmup", type=int, default=4)
    args = parser.parse_args()
    spin = importlib.import_module(args.app).spin
    for result in [spin.delay(1000) for _ in range(args.warmup)]:
        result.get(timeout=120)
    started = time.time()
    results = [spin.delay(args.iterations) for _ in range(args.tasks)]
    finished = max(result.get(timeout=600) for result in results)  # each task answers when it finished
    wall = finished - started
    json.dump({"tasks": args.tasks, "wall_s": wall, "throughput": args.tasks / wall}, sys.stdout)


if __name__ == "__main__":
    main()
