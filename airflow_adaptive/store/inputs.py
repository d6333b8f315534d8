"""Declared inputs in the SQL store: reads and sizes per URI, staged copies per node."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection, and_, delete, select

from airflow_adaptive.core.locality import CachedInput, InputState, InputUse
from airflow_adaptive.core.normalise import fit_key
from airflow_adaptive.store.dialects import count_read, insert_missing, upsert
from airflow_adaptive.store.tables import cached_input, input_dag, shared_input


def uri_key(uri: str) -> str:
    return hashlib.sha256(uri.encode("utf-8", "surrogatepass")).hexdigest()


def read_state(conn: Connection, uris: Sequence[str], keys: Sequence[str]) -> InputState:
    """Earlier reads and sizes of the URIs, and the nodes holding each content key (two indexed reads)."""
    by_key = {uri_key(u): u for u in uris}
    reads, sizes = {}, {}
    if by_key:
        query = select(shared_input.c.uri_key, shared_input.c.reads, shared_input.c.size_bytes)
        for key, count, size in conn.execute(query.where(shared_input.c.uri_key.in_(list(by_key)))):
            reads[by_key[key]] = int(count)
            if size is not None:
                sizes[by_key[key]] = int(size)
    holders: dict[str, list[str]] = {}
    if keys:
        query = select(cached_input.c.content_key, cached_input.c.node_name)
        for row in conn.execute(query.where(cached_input.c.content_key.in_(list(keys)))):
            holders.setdefault(str(row[0]), []).append(str(row[1]))
    return InputState(reads, sizes, {k: tuple(sorted(v)) for k, v in holders.items()})


def record(conn: Connection, node: str | None, uses: Sequence[InputUse], evicted: Sequence[str],
           now: datetime, dag_id: str | None = None) -> None:  # fmt: skip
    """Count the reads and which DAG read them, remember sizes, and bring the node's cache rows to
    what its report said."""
    dialect = conn.dialect.name
    reads = {
        uri_key(u.uri): {"uri_key": uri_key(u.uri), "uri": u.uri, "size_bytes": u.size_bytes, "reads": 1,
                         "last_read_at": now}
        for u in uses
    }  # fmt: skip
    if reads:
        conn.execute(count_read(dialect, shared_input), [reads[k] for k in sorted(reads)])
        if dag_id is not None:
            readers = [{"uri_key": key, "dag_id": fit_key(dag_id)} for key in sorted(reads)]
            conn.execute(insert_missing(dialect, input_dag, readers, ["uri_key", "dag_id"]))
    if node is None:
        return
    gone = [u.key for u in uses if u.key and not u.cached] + list(evicted)
    if gone:
        where = and_(cached_input.c.node_name == node, cached_input.c.content_key.in_(gone))
        conn.execute(delete(cached_input).where(where))
    held = {
        u.key: {"node_name": node, "content_key": u.key, "uri": u.uri, "size_bytes": u.size_bytes or 0,
                "last_used_at": now}
        for u in uses if u.key and u.cached
    }  # fmt: skip
    if held:
        columns = ["node_name", "content_key", "uri", "size_bytes", "last_used_at"]
        statement = upsert(dialect, cached_input, columns, ["node_name", "content_key"])
        conn.execute(statement, [held[k] for k in sorted(held)])


def cached(conn: Connection, limit: int = 1000, dag_ids: frozenset[str] | None = None) -> list[CachedInput]:
    """Staged copies by node, most recently used first; with ``dag_ids``, only copies of inputs one of
    those DAGs read."""
    query = select(cached_input)
    if dag_ids is not None:
        readers = select(input_dag.c.uri_key).where(input_dag.c.dag_id.in_(sorted(map(fit_key, dag_ids))))
        readable = select(shared_input.c.uri).where(shared_input.c.uri_key.in_(readers))
        query = query.where(cached_input.c.uri.in_(readable))
    query = query.order_by(cached_input.c.node_name, cached_input.c.last_used_at.desc()).limit(limit)
    return [
        CachedInput(r.node_name, r.content_key, r.uri, int(r.size_bytes), r.last_used_at)
        for r in conn.execute(query)
    ]


def forget_nodes_except(conn: Connection, nodes: Sequence[str]) -> None:
    """A node that left the cluster holds nothing any more."""
    conn.execute(delete(cached_input).where(cached_input.c.node_name.not_in(list(nodes))))
