"""Dask arrays whose row blocks live on chosen workers, for tests that control data placement."""

from __future__ import annotations

import pytest

from daskgb.dask.watch import live_workers

da = pytest.importorskip("dask.array")


def on_workers(client, X, chunk_rows, placement, fresh=False):
    """A persisted dask array whose row block i lives on worker placement[i] (an index). fresh:
    blocks under new keys (dask keys blocks by content: the same rows placed again would be found
    where they were first put)."""
    import dask

    addrs = sorted(live_workers(client))
    assert sum(chunk_rows) == X.shape[0]
    blocks, start = [], 0
    for rows, w in zip(chunk_rows, placement):
        with dask.annotate(workers=[addrs[w]], allow_other_workers=False):
            block = da.from_array(X[start : start + rows], chunks=-1, name=False if fresh else None)
            blocks.append(client.persist(block, optimize_graph=False))
        start += rows
    if len(set(placement)) == 1:
        # Keep the joining step on the same worker too, so the other worker really holds nothing.
        with dask.annotate(workers=[addrs[placement[0]]], allow_other_workers=False):
            return client.persist(da.concatenate(blocks, axis=0), optimize_graph=False)
    return da.concatenate(blocks, axis=0)
