"""Memory cgroups read and grown in place, on fake cgroup folders (everywhere); against the
kernel's own OOM killer: ``test_cgroup_real_kernel.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_adaptive.agent.cgroup import CgroupUnavailable, MemoryCgroup, pod_cgroups
from airflow_adaptive.agent.watch import GrowthWatch, watch_locally
from airflow_adaptive.core.growth import GrowthRule

MiB = 1 << 20
V1_UNLIMITED_TEXT = "9223372036854771712\n"


# --- MemoryCgroup on fake folders -------------------------------------------------------------


def _files(folder: Path, **files: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name.replace("__", ".")).write_text(text)
    return folder


def _v2(folder: Path, current: int = 123, limit: str = "max\n") -> Path:
    events = "low 0\nhigh 0\nmax 7\noom 2\noom_kill 1\noom_group_kill 0\n"
    stat = "anon 100\nfile 23\nactive_file 3\ninactive_file 20\n"
    return _files(
        folder, memory__current=f"{current}\n", memory__max=limit, memory__events=events, memory__stat=stat
    )


def test_v2_files_are_read_and_the_limit_set(tmp_path: Path) -> None:
    cgroup = MemoryCgroup(_v2(tmp_path))
    assert (cgroup.version, cgroup.usage_bytes(), cgroup.limit_bytes(), cgroup.oom_kills()) == (
        2,
        123,
        None,
        1,
    )
    assert cgroup.working_set_bytes() == 103  # less the inactive page cache
    cgroup.set_limit(64 * MiB)
    assert (tmp_path / "memory.max").read_text() == str(64 * MiB)
    assert cgroup.limit_bytes() == 64 * MiB


def test_v1_files_are_read_and_the_swap_allowance_kept(tmp_path: Path) -> None:
    oom_control = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"
    cgroup = MemoryCgroup(
        _files(
            tmp_path,
            memory__usage_in_bytes="4096\n",
            memory__limit_in_bytes="100\n",
            memory__memsw__limit_in_bytes="150\n",
            memory__oom_control=oom_control,
            memory__stat="cache 96\ninactive_file 10\ntotal_cache 4000\ntotal_inactive_file 4000\n",
        )
    )
    assert (cgroup.version, cgroup.usage_bytes(), cgroup.limit_bytes(), cgroup.oom_kills()) == (
        1,
        4096,
        100,
        3,
    )
    assert cgroup.working_set_bytes() == 96  # the hierarchical total, as usage is
    cgroup.set_limit(200)  # memory plus swap moves with the limit: 50 of swap stays allowed
    assert (tmp_path / "memory.memsw.limit_in_bytes").read_text() == "250"
    cgroup.set_limit(60)
    assert (cgroup.limit_bytes(), (tmp_path / "memory.memsw.limit_in_bytes").read_text()) == (60, "110")


def test_v1_unlimited_and_an_old_kernel_without_oom_kill(tmp_path: Path) -> None:
    cgroup = MemoryCgroup(
        _files(
            tmp_path,
            memory__usage_in_bytes="1\n",
            memory__limit_in_bytes=V1_UNLIMITED_TEXT,
            memory__memsw__limit_in_bytes=V1_UNLIMITED_TEXT,
            memory__oom_control="oom_kill_disable 0\nunder_oom 0\n",
        )
    )
    assert (cgroup.limit_bytes(), cgroup.oom_kills()) == (None, 0)
    cgroup.set_limit(300)  # an unlimited memory plus swap stays unlimited
    assert (cgroup.limit_bytes(), (tmp_path / "memory.memsw.limit_in_bytes").read_text()) == (
        300,
        V1_UNLIMITED_TEXT,
    )


def test_missing_or_garbled_files_raise_one_error_naming_the_path(tmp_path: Path) -> None:
    with pytest.raises(CgroupUnavailable, match="nowhere"):
        MemoryCgroup(tmp_path / "nowhere")
    cgroup = MemoryCgroup(_v2(tmp_path))
    (tmp_path / "memory.current").unlink()
    with pytest.raises(CgroupUnavailable, match=r"memory\.current"):
        cgroup.usage_bytes()
    (tmp_path / "memory.max").write_text("lots\n")
    with pytest.raises(CgroupUnavailable, match=r"memory\.max.*'lots'"):
        cgroup.limit_bytes()


# --- pod_cgroups on fake kubelet trees --------------------------------------------------------

UID = "0f1e2d3c-aaaa-bbbb-cccc-123456789abc"
ESCAPED = UID.replace("-", "_")


def _tree(root: Path, *paths: str) -> None:
    for path in paths:
        _v2(root / path)


def test_pod_cgroups_under_the_systemd_driver(tmp_path: Path) -> None:
    pod = f"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{ESCAPED}.slice"
    _tree(
        tmp_path,
        f"{pod}/cri-containerd-aaa.scope",
        f"{pod}/cri-containerd-bbb.scope",
        f"{pod}/crio-conmon-ccc.scope",  # CRI-O's monitor, no container
        "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podother.slice/cri-containerd-ddd.scope",
    )
    assert pod_cgroups(tmp_path, UID) == [
        tmp_path / pod / "cri-containerd-aaa.scope",
        tmp_path / pod / "cri-containerd-bbb.scope",
    ]
    assert pod_cgroups(tmp_path, "no-such-pod") == []


def test_pod_cgroups_of_guaranteed_and_best_effort_pods_and_a_prefixed_root(tmp_path: Path) -> None:
    guaranteed = f"kubepods.slice/kubepods-pod{ESCAPED}.slice/crio-eee.scope"
    _tree(tmp_path / "a", guaranteed)
    assert pod_cgroups(tmp_path / "a", UID) == [tmp_path / "a" / guaranteed]
    best = f"kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{ESCAPED}.slice/docker-fff.scope"
    _tree(tmp_path / "b", best)
    assert pod_cgroups(tmp_path / "b", UID) == [tmp_path / "b" / best]
    # kubelet --cgroup-root=/kubelet.slice prefixes every slice name
    prefixed = f"kubelet-kubepods.slice/kubelet-kubepods-burstable.slice/kubelet-kubepods-burstable-pod{ESCAPED}.slice/cri-containerd-ggg.scope"
    _tree(tmp_path / "c", prefixed)
    assert pod_cgroups(tmp_path / "c", UID) == [tmp_path / "c" / prefixed]


def test_pod_cgroups_under_the_cgroupfs_driver_v1_and_v2(tmp_path: Path) -> None:
    v1 = f"memory/kubepods/burstable/pod{UID}"
    _tree(tmp_path / "v1", f"{v1}/0123abcd", f"{v1}/4567ef01", f"cpu/kubepods/burstable/pod{UID}/0123abcd")
    assert pod_cgroups(tmp_path / "v1", UID) == [
        tmp_path / "v1" / v1 / "0123abcd",
        tmp_path / "v1" / v1 / "4567ef01",
    ]
    assert pod_cgroups(tmp_path / "v1" / "memory", UID) == pod_cgroups(tmp_path / "v1", UID)
    _tree(tmp_path / "v2", f"kubepods/pod{UID}/crio-89ab", f"kubepods/pod{UID}/crio-conmon-89ab")
    assert pod_cgroups(tmp_path / "v2", UID) == [tmp_path / "v2" / f"kubepods/pod{UID}/crio-89ab"]


# --- GrowthWatch decisions, hand-computed -----------------------------------------------------

RULE = GrowthRule(latency_s=5.0, sample_s=2.0, default_headroom=0.2, factor=1.1, headrooms=1.5)  # window 7 s


def test_growth_watch_asks_once_then_waits_for_the_resize() -> None:
    watch = GrowthWatch(RULE, room_bytes=10_000)
    assert watch.hold_s == 15.0
    assert watch.observe(0.0, 500, 1000) is None  # no rate yet: 500 + 0.2 x 1000 < 1000
    # within a fifth of the limit: rate 175/s, rise = 200 + 175 x 7 = 1425 -> 850 + 1.5 x 1425
    assert watch.observe(2.0, 850, 1000) == 2988
    assert watch.asked_bytes == 2988
    assert watch.observe(4.0, 900, 1000) is None  # the resize may still be landing
    # landed: 910 + 0.2 x 2988 < 2988
    assert watch.observe(6.0, 910, 2988) is None
    assert watch.asked_bytes is None


def test_growth_watch_asks_again_when_an_ask_did_not_land_in_three_latencies() -> None:
    watch = GrowthWatch(RULE, room_bytes=10_000)
    watch.observe(0.0, 500, 1000)
    assert watch.observe(2.0, 850, 1000) == 2988
    assert watch.observe(16.0, 850, 1000) is None  # 14 s < 15 s
    # 17 s: the ask is over, and at rate 0 the rise is 200: 700 + 200 < 1000, no need now
    assert watch.observe(17.0, 700, 1000) is None
    assert watch.observe(19.0, 900, 1000) == 2250  # rate 100/s: rise 900 -> 900 + 1.5 x 900
    assert watch.asked_bytes == 2250


def test_growth_watch_respects_the_room_and_leaves_unlimited_alone() -> None:
    assert (
        GrowthWatch(RULE, room_bytes=10_000).observe(0.0, 850, 1000) == 1150
    )  # first sample: max(850 + 300, 1100)
    small = GrowthWatch(RULE, room_bytes=1500)
    small.observe(0.0, 500, 1000)
    assert small.observe(2.0, 850, 1000) == 1500
    none = GrowthWatch(RULE, room_bytes=1000)
    none.observe(0.0, 500, 1000)
    assert none.observe(2.0, 850, 1000) is None
    assert GrowthWatch(RULE, room_bytes=10_000).observe(0.0, 10**12, None) is None


def test_watch_locally_on_a_fake_cgroup_with_a_fake_clock(tmp_path: Path) -> None:
    folder = _v2(tmp_path, current=10 * MiB, limit=f"{48 * MiB}\n")
    (folder / "memory.stat").write_text("inactive_file 0\n")
    clock = [0.0]

    def sleep(seconds: float) -> None:  # 10 MiB + 20 MiB/s, as the kernel would show it
        clock[0] += seconds
        (folder / "memory.current").write_text(str(int((10 + 20 * clock[0]) * MiB)))

    rule = GrowthRule(latency_s=0.2, sample_s=0.1)
    growths = watch_locally(
        MemoryCgroup(folder), rule, 200 * MiB, lambda: clock[0] >= 10.0, sleep, lambda: clock[0]
    )
    assert growths, "usage rose to 210 MiB against a 48 MiB limit"
    assert all(old < new <= 200 * MiB for _, old, new in growths)
    assert [old for _, old, _ in growths[1:]] == [new for _, _, new in growths[:-1]]
    assert int((folder / "memory.max").read_text()) == growths[-1][2] == 200 * MiB


def test_watch_locally_fails_open_when_the_cgroup_goes(tmp_path: Path) -> None:
    folder = _v2(tmp_path)
    clock = [0.0]

    def sleep(seconds: float) -> None:
        clock[0] += seconds
        if clock[0] > 1.0:
            (folder / "memory.current").unlink(missing_ok=True)

    assert watch_locally(MemoryCgroup(folder), RULE, MiB, lambda: False, sleep, lambda: clock[0]) == []
