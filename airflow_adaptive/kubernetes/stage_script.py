"""The staging init container's program: copy declared inputs into the node-local cache.

It runs as ``python3 -c STAGE_SCRIPT SPEC`` in the staging image, so the image needs Python 3 and
nothing of this package (fsspec, when installed, reaches object stores; without it ``file://``,
plain paths and ``http(s)://`` work). SPEC is JSON: the cache root, the per-node budget in bytes,
the report file and the inputs (content key, URI, size). For each input, under a per-entry lock
(``flock``, so two pods on one node never copy the same object twice): a complete entry of the
right size is a hit (its time is touched: least-recently-used order); otherwise least recently
used entries that this pod does not need are evicted until the input fits the budget, and the
object is copied to a temporary file and renamed into place. Every failure is a line in the report
and the pod goes on (the task then reads shared storage): the program always exits 0.
"""

from __future__ import annotations

STAGE_SCRIPT = r"""
import fcntl, json, os, shutil, sys, time
spec = json.loads(sys.argv[1])
root, budget = spec["root"], int(spec["budget"])
report = {"v": 1, "hits": [], "copied": [], "failed": {}, "evicted": [], "copied_bytes": 0}
mine = {item["key"] for item in spec["inputs"]}

def entries():
    out = []
    for name in os.listdir(root):
        data = os.path.join(root, name, "data")
        if not name.startswith(".") and os.path.isfile(data):
            out.append((os.stat(os.path.join(root, name)).st_mtime, name, os.path.getsize(data)))
    return sorted(out)

def make_room(need):
    with open(os.path.join(root, ".evict.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        listed = entries()
        used = sum(size for _, _, size in listed)
        for _, name, size in listed:
            if used + need <= budget:
                break
            if name not in mine:
                shutil.rmtree(os.path.join(root, name), ignore_errors=True)
                report["evicted"].append(name)
                used -= size
        if used + need > budget:
            raise RuntimeError("the cache budget cannot hold it")

def fetch(uri, target):
    scheme = uri.split("://", 1)[0] if "://" in uri else ""
    if scheme in ("", "file"):
        return shutil.copyfile(uri[7:] if scheme else uri, target)
    if scheme in ("http", "https"):
        import urllib.request
        with urllib.request.urlopen(uri, timeout=60) as src, open(target, "wb") as dst:
            return shutil.copyfileobj(src, dst, 1 << 20)
    try:
        import fsspec
    except ImportError:
        raise RuntimeError("no reader for " + scheme + ":// in the staging image (install fsspec)")
    with fsspec.open(uri, "rb") as src, open(target, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)

def stage(item):
    entry = os.path.join(root, item["key"])
    data = os.path.join(entry, "data")
    os.makedirs(entry, exist_ok=True)
    with open(entry + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.isfile(data) and os.path.getsize(data) == item["size"]:
            os.utime(entry)
            report["hits"].append(item["key"])
            return
        if os.path.exists(data):
            os.remove(data)  # a partial or changed copy: copy it again
        make_room(item["size"])
        partial = data + ".partial." + str(os.getpid())
        try:
            fetch(item["uri"], partial)
            if os.path.getsize(partial) != item["size"]:
                raise RuntimeError("size changed: %d bytes, expected %d" % (os.path.getsize(partial), item["size"]))
            os.replace(partial, data)
        finally:
            if os.path.exists(partial):
                os.remove(partial)
        os.utime(entry)
        report["copied"].append(item["key"])
        report["copied_bytes"] += item["size"]

try:
    os.makedirs(root, exist_ok=True)
    if not os.access(root, os.W_OK):
        raise PermissionError("cache root " + root + " is not writable")
    for item in spec["inputs"]:
        try:
            stage(item)
        except Exception as err:
            report["failed"][item["key"]] = (type(err).__name__ + ": " + str(err))[:160]
except Exception as err:
    for item in spec["inputs"]:
        report["failed"].setdefault(item["key"], (type(err).__name__ + ": " + str(err))[:160])
line = "__STAGE_PREFIX__" + json.dumps(report, separators=(",", ":"))[:3000]
for path in (spec["report"], "/dev/termination-log"):
    try:
        with open(path, "w") as out:
            out.write(line + "\n")
    except OSError:
        pass
print(line)
""".strip()


def stage_script(report_prefix: str) -> str:
    """The program, writing its report line (to the report file and its own termination message)
    with ``report_prefix``: the line the wrapper copies beside its usage line."""
    return STAGE_SCRIPT.replace("__STAGE_PREFIX__", report_prefix)
