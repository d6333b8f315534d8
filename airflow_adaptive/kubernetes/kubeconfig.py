"""Kubeconfig files as kubectl finds them, and why the client refused one, in a line."""

from __future__ import annotations

import os

from airflow_adaptive.failopen import first_line


def names_a_file(paths: str) -> bool:
    """Whether ``paths`` (``os.pathsep``-separated, ``~`` allowed, as ``$KUBECONFIG``) names a file."""
    return any(os.path.isfile(os.path.expanduser(p)) for p in paths.split(os.pathsep) if p)


def unusable(err: BaseException, limit: int = 200) -> str:
    """Why the client refused a kubeconfig (it raises TypeError for YAML that is no mapping, and
    yaml's own error for text that is no YAML)."""
    import yaml

    if isinstance(err, yaml.YAMLError):
        return f"not YAML: {first_line(err, limit)}"
    if isinstance(err, UnicodeDecodeError):  # binary, or another encoding than YAML's UTF-8/16
        return "not YAML: not UTF-8 text"
    return "not a kubeconfig" if isinstance(err, (TypeError, AttributeError)) else first_line(err, limit)
