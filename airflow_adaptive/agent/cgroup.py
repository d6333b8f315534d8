"""One memory cgroup, read and set through its files (cgroup v1 or v2), and where a pod's are.

v2 (unified): ``memory.current``, ``memory.max`` ("max" is unlimited) and ``memory.events``.
v1: ``memory.usage_in_bytes``, ``memory.limit_in_bytes`` (unlimited reads as PAGE_COUNTER_MAX
in bytes, 9223372036854771712 on x86-64) and ``memory.oom_control``, whose ``oom_kill`` line is
there since Linux 4.13. Both usages count the page cache the cgroup charged, which the kernel
reclaims before it kills: ``working_set_bytes`` leaves the inactive part of it out.
"""

from __future__ import annotations

from pathlib import Path

V1_UNLIMITED = 2**60  # v1 reports "no limit" as PAGE_COUNTER_MAX * page size, far above this
_QOS_CLASSES = ("", "burstable", "besteffort")  # "": Guaranteed pods sit right under kubepods


class CgroupUnavailable(Exception):
    """A cgroup file is missing, unreadable, unwritable or not understood."""


class MemoryCgroup:
    """The memory files of one cgroup: a container's, or any other."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        if (self.path / "memory.max").is_file():
            self.version = 2
        elif (self.path / "memory.limit_in_bytes").is_file():
            self.version = 1
        else:
            raise CgroupUnavailable(f"{self.path}: no memory.max (v2) or memory.limit_in_bytes (v1)")

    def __repr__(self) -> str:
        return f"MemoryCgroup({str(self.path)!r}, v{self.version})"

    def usage_bytes(self) -> int:
        return self._read_int("memory.current" if self.version == 2 else "memory.usage_in_bytes")

    def working_set_bytes(self) -> int:
        """Usage less the inactive page cache, which the kernel reclaims before it OOM-kills: what
        the kubelet and cAdvisor call the working set (a task writing files runs at its limit)."""
        return self.usage_and_working_set_bytes()[1]

    def usage_and_working_set_bytes(self) -> tuple[int, int]:
        """Usage (page cache included) and the working set, from one read of each file."""
        usage = self.usage_bytes()
        inactive = self._keyed("memory.stat", "inactive_file" if self.version == 2 else "total_inactive_file")
        return usage, max(usage - inactive, 0)

    def limit_bytes(self) -> int | None:
        """The limit in force, or None when there is none."""
        if self.version == 2:
            text = self._read("memory.max").strip()
            return None if text == "max" else self._parse_int("memory.max", text)
        limit = self._read_int("memory.limit_in_bytes")
        return None if limit >= V1_UNLIMITED else limit

    def oom_kills(self) -> int:
        """How many processes the kernel OOM-killed in this cgroup (v2: and below it)."""
        if self.version == 2:
            return self._keyed("memory.events", "oom_kill")
        return self._keyed("memory.oom_control", "oom_kill")  # 0 before Linux 4.13

    def set_limit(self, limit_bytes: int) -> None:
        """Put a new limit in force. On a cluster the kubelet does this after a ``pods/resize``;
        this is the applier for tests and for nodes without one."""
        if limit_bytes <= 0:
            raise ValueError(f"a memory limit must be positive, not {limit_bytes}")
        if self.version == 2:
            self._write("memory.max", limit_bytes)
            return
        # v1 refuses a limit above memory.memsw.limit_in_bytes (memory plus swap) with EINVAL, and
        # runtimes set that one too: keep the swap allowance, raising it first and lowering it last.
        memsw = self.path / "memory.memsw.limit_in_bytes"
        if not memsw.is_file():
            self._write("memory.limit_in_bytes", limit_bytes)
            return
        old_limit, old_memsw = self._read_int("memory.limit_in_bytes"), self._read_int(memsw.name)
        if old_memsw >= V1_UNLIMITED:
            self._write("memory.limit_in_bytes", limit_bytes)
            return
        new_memsw = limit_bytes + max(old_memsw - old_limit, 0)
        if limit_bytes > old_limit:
            self._write(memsw.name, new_memsw)
            self._write("memory.limit_in_bytes", limit_bytes)
        else:
            self._write("memory.limit_in_bytes", limit_bytes)
            self._write(memsw.name, new_memsw)

    def _read(self, name: str) -> str:
        file = self.path / name
        try:
            return file.read_text()
        except OSError as err:
            raise CgroupUnavailable(f"cannot read {file}: {err.strerror or err}") from None

    def _parse_int(self, name: str, text: str) -> int:
        try:
            return int(text.strip())
        except ValueError:
            raise CgroupUnavailable(f"{self.path / name}: {text.strip()[:40]!r} is no number") from None

    def _read_int(self, name: str) -> int:
        return self._parse_int(name, self._read(name))

    def _keyed(self, name: str, key: str) -> int:
        """The value on the ``key value`` line of a flat-keyed file, 0 when the line is missing."""
        for line in self._read(name).splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == key:
                return self._parse_int(name, parts[1])
        return 0

    def _write(self, name: str, value: int) -> None:
        file = self.path / name
        try:
            file.write_text(str(value))
        except OSError as err:
            raise CgroupUnavailable(f"cannot write {value} to {file}: {err.strerror or err}") from None


def _pod_dirs(base: Path, pod_uid: str) -> list[Path]:
    """Where the kubelet may have put the pod's cgroup under ``base``, for both drivers and the
    three QoS classes (Guaranteed, Burstable, BestEffort)."""
    found = [base / "kubepods" / qos / f"pod{pod_uid}" for qos in _QOS_CLASSES]  # cgroupfs
    escaped = pod_uid.replace("-", "_")  # systemd reads "-" as a step down the slice tree
    # "*kubepods.slice": a kubelet --cgroup-root such as kubelet.slice prefixes every slice name.
    for top in sorted(base.glob("*kubepods.slice")):
        stem = top.name.removesuffix(".slice")
        found.append(top / f"{stem}-pod{escaped}.slice")
        for qos in _QOS_CLASSES[1:]:
            found.append(top / f"{stem}-{qos}.slice" / f"{stem}-{qos}-pod{escaped}.slice")
    return found


def pod_cgroups(root: Path, pod_uid: str) -> list[Path]:
    """The container cgroups of one pod under a kubelet cgroup root, sorted; [] when none is there.

    ``root`` is the mounted hierarchy: ``/sys/fs/cgroup`` for v2, ``/sys/fs/cgroup/memory`` for
    v1 (given ``/sys/fs/cgroup`` on a v1 node, its ``memory/`` is searched too). The layouts
    matched, as the kubelet names a pod's cgroup {"kubepods", <qos>, "pod" + uid} (pkg/kubelet/cm,
    ``GetPodCgroupNameSuffix``; Guaranteed pods have no QoS level) and the runtimes name their
    containers' cgroups below it:

    - cgroupfs driver: ``kubepods[/burstable|/besteffort]/pod<uid>/<container id>`` (containerd,
      Docker), ``.../crio-<container id>`` (CRI-O);
    - systemd driver: each level a slice named by its path with "-" joined, the uid's own "-"
      escaped to "_" (``escapeSystemdCgroupName``):
      ``kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_>.slice/`` (Guaranteed:
      ``kubepods.slice/kubepods-pod<uid_>.slice/``), then a scope per container named
      ``cri-containerd-<id>.scope``, ``crio-<id>.scope`` or ``docker-<id>.scope``
      (``SystemdPathPrefixOfRuntime``).

    CRI-O's monitor cgroup ``crio-conmon-<id>[.scope]`` sits beside its containers and is left
    out. The sandbox (pause) container's cgroup is a container cgroup too and is kept: which
    cgroup is which container is in the pod status's ``containerID`` (``<runtime>://<id>``).
    """
    bases = [root, root / "memory"]
    found: list[Path] = []
    for base in bases:
        for pod_dir in _pod_dirs(base, pod_uid):
            try:
                children = list(pod_dir.iterdir())
            except OSError:  # not this layout, or the pod went away meanwhile
                continue
            found.extend(c for c in children if c.is_dir() and not c.name.startswith("crio-conmon-"))
    return sorted(set(found))
