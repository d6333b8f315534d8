"""The POSIX ``sh`` wrapper that reports a container's own resource usage on exit.

It runs the user's command as a child (stdin, stdout and stderr untouched) and
forwards TERM to it (and INT, which a POSIX shell's background child ignores
unless it installs its own handler); a signal that comes before the child exists
is forwarded once it does. A signal interrupts ``wait``, so the wrapper waits
again to keep the child's own exit code (a second wait answering 127 means the
first already collected it). Then it appends one usage line (after the staging
report, when the pod staged inputs) to the termination message file and exits
with the child's exit code. While the child runs, a background loop reads the
cgroup's memory once a second and notes each new maximum, from which the usage
line gets the memory profile (``core/growth.py``: when each step of the peak was
first reached; a step first reached between the last sample and the end counts
at the end) and the rebound (``core/growth_plan.py: rebound_of``, over the same
samples' working set: usage less the inactive page cache, as the grow agent
reads it). It needs only ``sh``, ``/proc``, ``sleep`` and ``mktemp`` (without
a writable temporary folder there is no profile): no awk.
"""

from __future__ import annotations

from collections.abc import Sequence

from kubernetes.client import models as k8s

from airflow_adaptive.core.growth_plan import FALL_GRACE_S, FALL_PERCENT, PROFILE_STEPS
from airflow_adaptive.core.telemetry import USAGE_PREFIX

TERMINATION_FILE_ENV = "ADAPTIVE_TERMINATION_FILE"
CGROUP_ROOT_ENV = "ADAPTIVE_CGROUP_ROOT"

WRAPPER_SCRIPT = (
    r"""
uptime_cs() { read -r up _ < /proc/uptime 2>/dev/null || { echo; return; }; s=${up%.*}; c=${up#*.}; echo $((s * 100 + 1$c - 100)); }
t0=$(uptime_cs)
child=; sig=; sent=
trap 'sig=TERM; [ -z "$child" ] || { kill -TERM "$child" 2>/dev/null; sent=1; }' TERM
trap 'sig=INT; [ -z "$child" ] || { kill -INT "$child" 2>/dev/null; sent=1; }' INT
exec 3<&0
"$@" <&3 3<&- &
child=$!
exec 3<&-
[ -z "$sig" ] || [ -n "$sent" ] || kill -"$sig" "$child" 2>/dev/null
cg=${ADAPTIVE_CGROUP_ROOT:-/sys/fs/cgroup}
mf=; for f in "$cg/memory.current" "$cg/memory/memory.usage_in_bytes"; do [ -r "$f" ] && { mf=$f; break; }; done
sf=; ik=; for f in "$cg/memory.stat:inactive_file" "$cg/memory/memory.stat:total_inactive_file"; do
  [ -r "${f%:*}" ] && { sf=${f%:*}; ik=${f##*:}; break; }; done
log=; sampler=
if [ -n "$mf" ] && [ -n "$t0" ] && log=$(mktemp 2>/dev/null); then
  ( trap - TERM INT; mx=0; wx=0; lo=; re=0; while read -r v < "$mf"; do
      case $v in ''|*[!0-9]*) sleep 1; continue;; esac
      w=$v; [ -z "$sf" ] || while read -r k n; do [ "$k" = "$ik" ] && { w=$((v - n)); break; }; done < "$sf"
      [ "$w" -ge 0 ] || w=0
      if [ -n "$lo" ]; then
        [ "$w" -lt "$lo" ] && lo=$w
        [ $((w - lo)) -gt "$re" ] && { re=$((w - lo)); echo "r $re" >> "$log"; }
      elif [ $((w * 100)) -lt $((wx * __FALL__)) ]; then lo=$w; echo "f $(($(uptime_cs) - t0))" >> "$log"; fi
      [ "$w" -gt "$wx" ] && wx=$w
      [ "$v" -gt "$mx" ] && { mx=$v; echo "$(($(uptime_cs) - t0)) $v" >> "$log"; }; sleep 1; done ) &
  sampler=$!
fi
wait "$child"; rc=$?
while [ -n "$sig" ] && [ "$rc" -gt 128 ]; do
  sig=; wait "$child"; r=$?; [ "$r" -eq 127 ] && break; rc=$r
done
t1=$(uptime_cs)
[ -z "$sampler" ] || kill "$sampler" 2>/dev/null
peak=null; cpu=null; rb=null; wb=null; wall=null
if [ -r "$cg/memory.peak" ]; then read -r peak < "$cg/memory.peak"
elif [ -r "$cg/memory/memory.max_usage_in_bytes" ]; then read -r peak < "$cg/memory/memory.max_usage_in_bytes"
fi
if [ -r "$cg/cpu.stat" ]; then
  while read -r k v; do [ "$k" = usage_usec ] && cpu=$((v / 1000)); done < "$cg/cpu.stat"
elif [ -r "$cg/cpuacct/cpuacct.usage" ]; then read -r v < "$cg/cpuacct/cpuacct.usage"; cpu=$((v / 1000000))
fi
if [ -r "$cg/io.stat" ]; then
  rb=0; wb=0
  while read -r line; do for f in $line; do case $f in
    rbytes=*) rb=$((rb + ${f#rbytes=}));; wbytes=*) wb=$((wb + ${f#wbytes=}));; esac; done; done < "$cg/io.stat"
elif [ -r "$cg/blkio/blkio.throttle.io_service_bytes" ]; then
  rb=0; wb=0
  while read -r _ op n; do case $op in Read) rb=$((rb + n));; Write) wb=$((wb + n));; esac; done < "$cg/blkio/blkio.throttle.io_service_bytes"
fi
[ -n "$t0" ] && [ -n "$t1" ] && wall=$(((t1 - t0) * 10))
prof=null; reb=null
if [ -n "$log" ] && [ -s "$log" ] && [ -n "$t1" ]; then
  top=$peak; [ "$top" = null ] && while read -r tc v; do case $tc in f|r) ;; *) top=$v;; esac; done < "$log"
  prof=; k=1; n=__STEPS__
  at() { c=$(($1 % 100)); [ "$c" -lt 10 ] && c=0$c; prof="$prof${prof:+,}$(($1 / 100)).$c"; k=$((k + 1)); }
  fell=
  while read -r tc v; do
    case $tc in f) fell=$v; reb=0; continue;; r) reb=$v; continue;; esac
    while [ "$k" -le "$n" ] && [ $((v * n)) -ge $((top * k)) ]; do at "$tc"; done
  done < "$log"
  [ -z "$fell" ] || [ $((t1 - t0 - fell)) -ge __GRACE_CS__ ] || reb=null
  while [ "$k" -le "$n" ]; do at $((t1 - t0)); done
  prof="[$prof]"
fi
[ -z "$log" ] || rm -f "$log"
[ "$cpu" = null ] || cpu="$((cpu / 1000)).$(printf %03d $((cpu % 1000)))"
[ "$wall" = null ] || wall="$((wall / 1000)).$(printf %03d $((wall % 1000)))"
if [ -n "${ADAPTIVE_STAGE_REPORT:-}" ] && [ -r "$ADAPTIVE_STAGE_REPORT" ] && read -r stage < "$ADAPTIVE_STAGE_REPORT"; then
  printf '\n%s' "$stage" >> "${ADAPTIVE_TERMINATION_FILE:-/dev/termination-log}" 2>/dev/null
fi
printf '\n%s{"v":1,"exit_code":%s,"peak_memory_bytes":%s,"cpu_core_seconds":%s,"wall_seconds":%s,"read_bytes":%s,"write_bytes":%s,"memory_profile_s":%s,"memory_rebound_bytes":%s}\n' \
  "__PREFIX__" "$rc" "${peak:-null}" "$cpu" "$wall" "$rb" "$wb" "$prof" "$reb" >> "${ADAPTIVE_TERMINATION_FILE:-/dev/termination-log}" 2>/dev/null
exit "$rc"
""".replace("__PREFIX__", USAGE_PREFIX)
    .replace("__STEPS__", str(PROFILE_STEPS))
    .replace("__FALL__", str(FALL_PERCENT))
    .replace("__GRACE_CS__", str(round(FALL_GRACE_S * 100)))
    .strip()
)

WRAPPER_NAME = "adaptive-usage-wrapper"


def wrap_command(cmds: Sequence[str], arguments: Sequence[str]) -> list[str]:
    """The container command that runs ``cmds + arguments`` under the wrapper."""
    return ["/bin/sh", "-c", WRAPPER_SCRIPT, WRAPPER_NAME, *cmds, *arguments]


def is_wrapped(command: Sequence[str] | None) -> bool:
    return bool(command) and len(command or []) >= 4 and command[3] == WRAPPER_NAME  # type: ignore[index]


def container_wrapped(container: k8s.V1Container) -> bool:
    return is_wrapped(container.command) or is_wrapped(container.args)


def unwrapped(container: k8s.V1Container) -> tuple[list[str], list[str]]:
    """The user's own command and arguments of a container the wrapper may run."""
    for words in (container.command, container.args):
        if is_wrapped(words):
            return list(words[4:]), []
    return list(container.command or []), list(container.args or [])


def wrap_container(container: k8s.V1Container, *, entrypoint_runs_args: bool = False) -> bool:
    """Run the container's command under the wrapper (once), telling it where the termination
    message goes; False, and nothing changed, when there is no command (the image's entrypoint
    runs: the metrics API is sampled instead).

    ``entrypoint_runs_args``: a container with arguments only runs them through an entrypoint that
    runs ``bash …`` arguments as given (Airflow's image does: its worker pods have no command), so
    the wrapper goes into the arguments and the entrypoint stays.
    """
    if container_wrapped(container):
        return True
    if container.command:
        container.command = wrap_command(container.command, container.args or [])
        container.args = None
    elif entrypoint_runs_args and container.args:
        container.args = ["bash", *wrap_command([], container.args)[1:]]
    else:
        return False
    if container.termination_message_path:
        env = list(container.env or [])
        env.append(k8s.V1EnvVar(name=TERMINATION_FILE_ENV, value=container.termination_message_path))
        container.env = env
    return True
