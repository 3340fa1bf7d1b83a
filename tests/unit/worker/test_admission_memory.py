"""Memory readers on fake cgroup trees: current usage (never peak), the working set, the ceiling."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Optional

from sync_worker.runtime.admission import MemoryProbe

MIB = 1024 * 1024


def _tree(tmp_path: Path, files: Dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def _probe(root: Path, cgroup: str = "0::/\n", vmrss: Optional[str] = None, peak: Optional[int] = None,
           ram: Optional[int] = 8 * 1024 * MIB, subtract: bool = True) -> MemoryProbe:
    (root / "proc").mkdir(exist_ok=True)
    (root / "proc" / "cgroup").write_text(cgroup)
    status = root / "proc" / "status"
    status.write_text(f"Name:\tpython\nVmRSS:\t{vmrss}\n" if vmrss else "Name:\tpython\n")
    return MemoryProbe(subtract_page_cache=subtract, v2_root=str(root / "v2"), v1_root=str(root / "v1"),
                       proc_cgroup=str(root / "proc" / "cgroup"), proc_status=str(status),
                       peak_reader=lambda: peak, physical_ram=lambda: ram)


def test_cgroup_v2_working_set_subtracts_inactive_file(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"v2/memory.current": f"{500 * MIB}\n", "v2/memory.max": f"{700 * MIB}\n",
                            "v2/memory.stat": f"anon {300 * MIB}\ninactive_file {100 * MIB}\nactive_file 5\n"})
    probe = _probe(root)
    reading = probe.usage()
    assert (reading.usage_bytes, reading.source) == (400 * MIB, "cgroup_v2_working_set")
    assert (probe.limit(), probe.limit_source) == (700 * MIB, "cgroup_v2_memory_max")


def test_cgroup_v2_raw_charge_without_subtraction_or_stat(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"v2/memory.current": f"{500 * MIB}", "v2/memory.max": "max",
                            "v2/memory.stat": f"inactive_file {100 * MIB}\n"})
    assert _probe(root, subtract=False).usage().source == "cgroup_v2_current"
    (root / "v2" / "memory.stat").write_text(f"inactive_file {600 * MIB}\n")  # not below usage: ignored
    probe = _probe(root)
    assert (probe.usage().usage_bytes, probe.usage().source) == (500 * MIB, "cgroup_v2_current")
    assert (probe.limit(), probe.limit_source) == (8 * 1024 * MIB, "physical_ram")  # "max" = unlimited


def test_cgroup_v2_directory_from_proc_self_cgroup(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"v2/kubepods/pod1/memory.current": f"{64 * MIB}",
                            "v2/kubepods/pod1/memory.max": f"{256 * MIB}"})
    probe = _probe(root, cgroup="0::/kubepods/pod1\n")
    assert probe.v2_dir == str(root / "v2" / "kubepods" / "pod1")
    assert probe.usage().usage_bytes == 64 * MIB and probe.limit() == 256 * MIB


def test_cgroup_v1_working_set_prefers_total_inactive_file(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"v1/memory.usage_in_bytes": f"{300 * MIB}", "v1/memory.limit_in_bytes": f"{700 * MIB}",
                            "v1/memory.stat": f"inactive_file {10 * MIB}\ntotal_inactive_file {50 * MIB}\n"})
    probe = _probe(root)
    assert (probe.usage().usage_bytes, probe.usage().source) == (250 * MIB, "cgroup_v1_working_set")
    assert (probe.limit(), probe.limit_source) == (700 * MIB, "cgroup_v1_limit")
    (root / "v1" / "memory.stat").write_text(f"inactive_file {10 * MIB}\n")
    assert _probe(root).usage().usage_bytes == 290 * MIB  # falls back to inactive_file
    assert _probe(root, subtract=False).usage().source == "cgroup_v1_usage"


def test_cgroup_v1_reads_the_process_own_child_cgroup(tmp_path: Path) -> None:
    """Better than the seed: a worker in a child cgroup reads that cgroup, not the host root."""
    root = _tree(tmp_path, {"v1/memory.usage_in_bytes": f"{9000 * MIB}", "v1/memory.limit_in_bytes": str(2 ** 63),
                            "v1/jobs/w1/memory.usage_in_bytes": f"{120 * MIB}",
                            "v1/jobs/w1/memory.limit_in_bytes": f"{700 * MIB}"})
    probe = _probe(root, cgroup="9:pids:/\n4:memory:/jobs/w1\n0::/\n")
    assert probe.usage().usage_bytes == 120 * MIB and probe.limit() == 700 * MIB
    unlimited = _probe(root, cgroup="4:memory:/\n")
    assert unlimited.limit_source == "physical_ram"  # 2**63 means unlimited


def test_proc_vmrss_then_rusage_peak_then_unavailable(tmp_path: Path) -> None:
    reading = _probe(tmp_path, vmrss="2048 kB", peak=99 * MIB).usage()
    assert (reading.usage_bytes, reading.source) == (2048 * 1024, "proc_vmrss")
    reading = _probe(tmp_path, peak=99 * MIB).usage()
    assert (reading.usage_bytes, reading.source) == (99 * MIB, "rusage_maxrss_peak")
    probe = _probe(tmp_path, ram=None)
    assert (probe.usage().usage_bytes, probe.usage().source) == (None, "unavailable")
    assert probe.limit() is None and probe.limit_source == "unavailable"


def test_injected_readers_are_custom_and_never_raise() -> None:
    def broken() -> Optional[int]:
        raise OSError("no")

    probe = MemoryProbe(usage_reader=broken, limit_reader=broken)
    assert (probe.usage().usage_bytes, probe.usage().source) == (None, "custom")
    assert probe.limit() is None
    assert MemoryProbe(usage_reader=lambda: 5, limit_reader=lambda: 10).limit() == 10


def test_ceiling_is_read_once(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"v2/memory.current": "1000", "v2/memory.max": "4000"})
    probe = _probe(root)
    assert probe.limit() == 4000
    (root / "v2" / "memory.max").write_text("8000")
    assert probe.limit() == 4000


def test_this_machine_gives_a_named_reading() -> None:
    probe = MemoryProbe()
    reading = probe.usage()
    assert reading.source in {"cgroup_v2_working_set", "cgroup_v2_current", "cgroup_v1_working_set",
                              "cgroup_v1_usage", "proc_vmrss", "rusage_maxrss_peak"}
    assert reading.usage_bytes is not None and reading.usage_bytes > 0
    assert probe.limit() is not None


def test_memory_stat_is_re_read_after_stat_max_age_the_charge_every_time(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"v2/memory.current": f"{500 * MIB}", "v2/memory.max": f"{700 * MIB}",
                            "v2/memory.stat": f"inactive_file {100 * MIB}\n"})
    now = [0.0]
    (root / "proc").mkdir(exist_ok=True)
    (root / "proc" / "cgroup").write_text("0::/\n")
    probe = MemoryProbe(v2_root=str(root / "v2"), proc_cgroup=str(root / "proc" / "cgroup"),
                        clock=lambda: now[0])
    assert probe.usage().usage_bytes == 400 * MIB
    (root / "v2" / "memory.current").write_text(f"{600 * MIB}")
    (root / "v2" / "memory.stat").write_text(f"inactive_file {50 * MIB}\n")
    assert probe.usage().usage_bytes == 500 * MIB  # fresh charge, stat from 0 s ago
    now[0] = 0.3  # > 0.25 s
    assert probe.usage().usage_bytes == 550 * MIB
