"""The real nestjs-durable engine (SqsTransport 0.2.0) on a local SQS (moto_server) runs our steps.

SQS queue names cannot contain dots, so these workers serve the dot-free twins of the steps
(``payments-charge-card``...). Same scenarios as over Redis and PostgreSQL, against our worker on
threads and under gevent and the published ``durable-worker`` 0.26.1 (``run_sqs_worker``).
"""

from __future__ import annotations

from typing import Iterator

import pytest

from ._nestjs_harness import Fleet, MotoServer, missing
from ._nestjs_scenarios import SCENARIOS

pytestmark = [pytest.mark.timeout(300)]

KINDS = ("threads", "gevent", "control")

_reason = missing("sqs")
if _reason:
    pytest.skip(_reason, allow_module_level=True)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    base = tmp_path_factory.mktemp("nestjs-sqs")
    moto = MotoServer(base)
    fleet = Fleet("sqs", moto.endpoint, base)
    try:
        yield fleet
    finally:
        fleet.close()
        moto.stop()



@pytest.mark.parametrize("scenario", list(SCENARIOS))
@pytest.mark.parametrize("kind", KINDS)
def test_engine_runs_the_step(fleet: Fleet, kind: str, scenario: str) -> None:
    engine, worker = fleet.member(kind)
    fleet.records[(kind, scenario)] = SCENARIOS[scenario](engine, worker, fleet.workdir(kind, scenario))


@pytest.mark.parametrize("kind", ("threads", "gevent"))
def test_a_long_step_keeps_its_message_invisible(fleet: Fleet, kind: str) -> None:
    """A step running for 3 visibility timeouts is not redelivered: our worker extends the visibility."""
    engine, worker = fleet.get(kind)
    workdir = fleet.workdir(kind, "long")
    result = engine.run(f"long-{kind}", "payments.slow-ok", {"dir": str(workdir), "seconds": 3 * fleet.lease},
                        timeout=60)
    assert result["status"] == "completed", (result, worker.log()[-2000:])
    assert (workdir / "slow-ok.starts").read_text().count("\n") == 1


def test_engine_records_match_the_control(fleet: Fleet) -> None:
    fleet.assert_matches_control(SCENARIOS)
