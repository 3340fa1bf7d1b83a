"""The real nestjs-durable engine (DbTransport 0.2.0 in its MySQL dialect, typeorm + mysql2) on MariaDB.

The step scenarios that run over PostgreSQL, against our worker on threads and under gevent and
against the published asyncio ``durable-worker`` 0.26.1 (the control, its ``[mysql]`` extra), each
with its own table prefix in the database ``sw_nestjs`` on Debian's MariaDB 10.11 (SKIP LOCKED).
"""

from __future__ import annotations

from typing import Iterator

import pytest

from ._nestjs_harness import Fleet, missing, mysql_url
from ._nestjs_scenarios import SCENARIOS

pytestmark = [pytest.mark.timeout(300)]

KINDS = ("threads", "gevent", "control")

_reason = missing("mysql")
if _reason:
    pytest.skip(_reason, allow_module_level=True)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    url = mysql_url()
    assert url is not None
    fleet = Fleet("mysql", url, tmp_path_factory.mktemp("nestjs-mysql"))
    yield fleet
    fleet.close()


@pytest.mark.parametrize("scenario", list(SCENARIOS))
@pytest.mark.parametrize("kind", KINDS)
def test_engine_runs_the_step(fleet: Fleet, kind: str, scenario: str) -> None:
    engine, worker = fleet.member(kind)
    fleet.records[(kind, scenario)] = SCENARIOS[scenario](engine, worker, fleet.workdir(kind, scenario))


@pytest.mark.parametrize("kind", ("threads", "gevent"))
def test_a_long_step_keeps_its_claim(fleet: Fleet, kind: str) -> None:
    """A step running for 3 leases is not claimed a second time: our worker renews the claim."""
    engine, worker = fleet.get(kind)
    workdir = fleet.workdir(kind, "long")
    result = engine.run(f"long-{kind}", "payments.slow-ok", {"dir": str(workdir), "seconds": 3 * fleet.lease},
                        timeout=60)
    assert result["status"] == "completed", (result, worker.log()[-2000:])
    assert (workdir / "slow-ok.starts").read_text().count("\n") == 1


def test_engine_records_match_the_control(fleet: Fleet) -> None:
    fleet.assert_matches_control(SCENARIOS)
