"""Durable selection on the real worker against the real dev server (threads; again under gevent).

Randomized races: each run selects among three activities whose durations are drawn at random
(and a timer that never wins), then awaits every loser through its handle, with several runs
sharing the worker's slots. Whatever the order in which the members finish, the server commits
the first to finish as the one ``SelectionResolved`` of the group, the code resumes with that
winner, the losers' results arrive through their handles, and each history replays cold to the
same commands the run sent.
"""

from __future__ import annotations

import importlib.util
import random
import time
from pathlib import Path
from typing import Any, Dict, List

from sync_worker import activity, workflow
from sync_worker.client import Client
from sync_worker.devserver import DevServer
from tests._sticky_equivalence import every_cut
from tests.e2e._worker_support import RunningWorker, make_worker, unique_queue


@activity.defn(name="e2e.select.sleepy")
def sleepy(tag: str, seconds: float) -> str:
    time.sleep(seconds)
    return f"{tag} after {seconds}"


@workflow.defn(name="e2e.select.race")
class Race:
    def run(self, ctx: Any, delays: Dict[str, float]) -> Any:
        chosen = yield ctx.select({
            **{tag: ctx.schedule_activity("e2e.select.sleepy", [tag, delay], start_to_close_timeout=30)
               for tag, delay in sorted(delays.items())},
            "never": ctx.start_timer(3600),
        })
        losers = {}
        for key, handle in sorted(chosen.remaining().items()):
            if key != "never":
                losers[key] = yield handle
        yield chosen.handles["never"].cancel()
        return {"winner": chosen.key, "value": chosen.value, "losers": losers}


def _history(client: Client, workflow_id: str) -> List[Dict[str, Any]]:
    return list(client.iter_history(workflow_id, client.describe_workflow(workflow_id).run_id or ""))


def _result(client: Client, workflow_id: str, note: Any) -> Any:
    try:
        return client.get_result(workflow_id, timeout=60, poll_interval=0.1)
    except TimeoutError:
        story = [(e["event_type"], (e.get("payload") or {}).get("sequence")) for e in _history(client, workflow_id)]
        raise AssertionError(f"{note}: stuck after {story}") from None


def test_randomized_races_commit_the_first_member_to_finish(dev_server: DevServer) -> None:
    rng = random.Random()
    seed = rng.randrange(1 << 30)
    rng.seed(seed)
    client = Client(dev_server.url)
    queue = unique_queue("select-race")
    worker = make_worker(client, task_queue=queue, workflows=[Race], activities=[sleepy],
                         max_concurrent_workflow_tasks=3, max_concurrent_activity_tasks=6,
                         poll_timeout=2.0, shutdown_timeout=10.0)
    try:
        with RunningWorker(worker) as running:
            runs = []
            for _ in range(5):
                delays = {tag: round(rng.uniform(0.0, 0.6), 2) for tag in ("a", "b", "c")}
                runs.append((client.start_workflow("e2e.select.race", delays, task_queue=queue), delays))
            results = [(_result(client, h.workflow_id, (seed, delays)), h, delays) for h, delays in runs]
            assert running.stop() is None
        for result, handle, delays in results:
            events = _history(client, handle.workflow_id)
            (verdict,) = [e["payload"] for e in events if e["event_type"] == "SelectionResolved"]
            first_done = next(e for e in events if e["event_type"] == "ActivityCompleted")
            assert (verdict["resolution_event_id"], verdict["member_key"]) == (first_done["id"], result["winner"]), \
                (seed, delays)
            assert result["value"] == f"{result['winner']} after {delays[result['winner']]}"
            assert result["losers"] == {tag: f"{tag} after {d}" for tag, d in delays.items()
                                        if tag != result["winner"]}
            assert [e["event_type"] for e in events].count("SelectionOperationCancelled") == 1
            every_cut(Race, [delays], events, "avro")
    finally:
        client.close()


def test_the_example_runs() -> None:
    """``examples/workflow_select.py`` end to end on its embedded dev server."""
    path = Path(__file__).resolve().parents[2] / "examples" / "workflow_select.py"
    spec = importlib.util.spec_from_file_location("example_workflow_select", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main([]) == {"winner": "acme", "quote": "acme: teapot for 18 EUR",
                               "late": "globex: teapot for 18 EUR"}
