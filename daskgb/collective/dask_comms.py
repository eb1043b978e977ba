"""Communicators: how workers sum histograms and agree on values (one process, Dask comms, NCCL).

Training is SPMD: one long-running task per worker, ranks ``0..n-1``, meeting only in
collectives, every rank calling the same collectives in the same order. Three
implementations of one contract (:class:`Communicator`):

- :class:`LocalCommunicator` -- one process; every collective returns its input.
- :class:`DaskCommunicator` -- CPU workers, over Dask's own comms (TCP/TLS/UCX frames), a star
  through rank 0. Rank 0 gathers every contribution, reduces in rank order
  (``x0 + x1 + x2 ...``) and sends the one result to everybody, so results are bit-identical
  on every rank and the same from run to run.
- :class:`NcclCommunicator` -- GPU workers: cupy arrays reduced by NCCL, everything else
  through a host communicator (a :class:`DaskCommunicator`).

Bootstrap of a Dask job (both steps run inside tasks)::

    addr = client.submit(start_root, job_id, workers=[w0], pure=False).result()
    # then, in the training task of each rank, pinned to its worker:
    with DaskCommunicator.connect(job_id, addr, rank, world_size) as comm:
        ...

Failures raise ``RuntimeError`` on every surviving rank, naming the rank at fault: a peer
process that dies is seen within milliseconds (its sockets close); a peer that hangs is
reported after the per-operation timeout (600 s, or ``DASKGB_COLLECTIVE_TIMEOUT``).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import functools
import json
import operator
import os
import socket
import threading
import time
import uuid

import numpy as np

OPS = ("sum", "max", "min")
TIMEOUT_ENV = "DASKGB_COLLECTIVE_TIMEOUT"
DEFAULT_TIMEOUT = 600.0

# Extra time a waiting peer gives rank 0 past the common deadline, so that when a third rank
# hangs, the peer receives rank 0's message naming it rather than timing out first itself.
_PEER_GRACE = 5.0
# How long rank 0, after a failure, keeps reading the other peers' messages already on their
# way: closing a socket with unread data resets it, which could lose our error message.
_DRAIN_GRACE = 2.0
# Messages that are not the collective itself (hello, error notices, close) are small.
_SHORT_TIMEOUT = 10.0


def resolve_timeout(timeout: float | None = None) -> float:
    """The per-operation timeout in seconds: ``timeout`` if given, else $DASKGB_COLLECTIVE_TIMEOUT, else 600."""
    if timeout is None:
        env = os.environ.get(TIMEOUT_ENV)
        if env is None or not env.strip():
            return DEFAULT_TIMEOUT
        try:
            timeout = float(env)
        except ValueError:
            raise ValueError(f"{TIMEOUT_ENV}={env!r} is not a number of seconds") from None
    timeout = float(timeout)
    if not timeout > 0:
        raise ValueError(f"collective timeout must be a positive number of seconds, got {timeout!r}")
    return timeout


def _check_op(op: str) -> None:
    if op not in OPS:
        raise ValueError(f"unknown reduction op {op!r}; expected one of {OPS}")


def _is_cupy(x) -> bool:
    return type(x).__module__.split(".", 1)[0] == "cupy"


# ---------------------------------------------------------------------------------------------
# The contract


class Communicator:
    """What training needs from a group of ranks; every rank calls the same methods in the same order.

    - ``allreduce(x, op)``: ``x`` a numpy array, a numpy or Python scalar (or, for NCCL, a cupy
      array); returns a value of the same kind, dtype and shape, equal on every rank.
    - ``allgather(obj)``: any picklable object; returns a list indexed by rank.
    - ``broadcast(obj, root)``: ``root``'s object, on every rank.
    - ``close()``: release sockets and GPU resources; idempotent. ``abort(reason)`` does the same
      after telling the other ranks why (best effort). Used as a context manager, a
      communicator closes on success and aborts with the exception's text on failure.
    """

    rank: int = 0
    world_size: int = 1
    # Whether allreduce sums device arrays where they are (NCCL): the device grower needs it.
    reduces_on_device: bool = False

    def allreduce(self, x, op: str = "sum", *, out=None):
        """x reduced over the ranks by op. out (an array of x's shape and dtype; x itself for
        an in-place reduction, which NCCL does without a second buffer) receives the result
        and is returned."""
        raise NotImplementedError

    def allgather(self, obj) -> list:
        raise NotImplementedError

    def broadcast(self, obj, root: int = 0):
        raise NotImplementedError

    def track(self, what: str) -> None:
        """Watch the device work queued so far as one collective call (NCCL's watchdog: a CUDA
        graph's replay holding its allreduces); nothing to watch elsewhere."""

    def close(self) -> None:
        pass

    def abort(self, reason: str) -> None:
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.abort(f"{exc_type.__name__}: {exc}")
        return False


class LocalCommunicator(Communicator):
    """The communicator of a single process: every collective returns its input."""

    rank = 0
    world_size = 1

    def allreduce(self, x, op: str = "sum", *, out=None):
        _check_op(op)
        return _into(out, x)

    def allgather(self, x):
        return [x]

    def broadcast(self, x, root: int = 0):
        if root != 0:
            raise ValueError(f"broadcast root {root} is not a rank of a world of size 1")
        return x


# ---------------------------------------------------------------------------------------------
# Host reduction, in rank order


_UFUNCS = {"sum": np.add, "max": np.maximum, "min": np.minimum}


def _into(out, result):
    """allreduce's result, written into out where one is given (out may be the input)."""
    if out is None or out is result:
        return result
    if getattr(out, "shape", None) != getattr(result, "shape", ()) or out.dtype != result.dtype:
        raise ValueError(f"allreduce out= must have the result's shape {getattr(result, 'shape', ())} and "
                         f"dtype {getattr(result, 'dtype', type(result))}")
    out[...] = result
    return out


def reduce_in_rank_order(values: list, op: str = "sum"):
    """Reduce one value per rank, rank 0 first: ``((v0 + v1) + v2) + ...``.

    The order is fixed so that float sums are the same on every run. Values must be all numpy
    arrays of one dtype and shape, or all scalars of one type; the result has that kind.
    """
    _check_op(op)
    first = values[0]
    if isinstance(first, np.ndarray):
        for rank, v in enumerate(values):
            if not isinstance(v, np.ndarray) or v.dtype != first.dtype or v.shape != first.shape:
                raise TypeError(
                    f"allreduce({op}): rank 0 passed a {first.dtype} array of shape {first.shape}, "
                    f"rank {rank} passed {_describe(v)}"
                )
        ufunc = _UFUNCS[op]
        out = np.array(first, copy=True, order="C")
        for v in values[1:]:
            ufunc(out, v, out=out)
        return out
    for rank, v in enumerate(values):
        if type(v) is not type(first):
            raise TypeError(f"allreduce({op}): rank 0 passed {_describe(first)}, rank {rank} passed {_describe(v)}")
    if type(first) is int:
        # Python ints stay exact (no int64 overflow).
        if op == "sum":
            return functools.reduce(operator.add, values)
        return max(values) if op == "max" else min(values)
    if not isinstance(first, (np.generic, float, bool, complex)):
        raise TypeError(f"allreduce needs numpy arrays or scalars, got {_describe(first)}")
    # 0-d numpy arithmetic: NaN propagates through max/min as in the array case.
    out = np.array(first)
    for v in values[1:]:
        out = _UFUNCS[op](out, np.array(v))
    return out[()] if isinstance(first, np.generic) else out.item()


def _describe(v) -> str:
    if isinstance(v, np.ndarray):
        return f"a {v.dtype} array of shape {v.shape}"
    return f"a {type(v).__module__}.{type(v).__qualname__}"


def _check_reducible(x, op: str) -> None:
    if isinstance(x, np.ndarray) or _is_cupy(x):
        return
    if isinstance(x, (int, float, bool, complex, np.generic)):
        return
    raise TypeError(f"allreduce({op}) needs a numpy/cupy array or a scalar, got {_describe(x)}")


# ---------------------------------------------------------------------------------------------
# Dask comms: bootstrap


class _Rendezvous:
    """Rank 0's listener of one job and the peers' comms it has parked, until rank 0 connects."""

    def __init__(self, job_id: str):
        self.job_id = job_id
        self.listener = None
        self.peers: dict[int, object] = {}  # rank -> comm
        self.world_sizes: dict[int, int] = {}  # rank -> world size it announced
        self.addresses: dict[int, str | None] = {}  # rank -> its worker's address, for error messages
        self.changed = asyncio.Event()
        self.closed = False

    async def handle(self, comm) -> None:
        from distributed.comm import CommClosedError

        try:
            hello = await asyncio.wait_for(comm.read(), _SHORT_TIMEOUT)
        except (asyncio.TimeoutError, CommClosedError, OSError):
            comm.abort()
            return
        problem = self._check_hello(hello)
        if problem is not None:
            try:
                await asyncio.wait_for(comm.write({"error": problem}), _SHORT_TIMEOUT)
                await comm.close()
            except Exception:
                comm.abort()
            return
        self.peers[hello["rank"]] = comm
        self.world_sizes[hello["rank"]] = hello["world_size"]
        self.addresses[hello["rank"]] = hello.get("address")
        self.changed.set()

    def _check_hello(self, hello) -> str | None:
        if not isinstance(hello, dict) or "rank" not in hello:
            return "malformed hello to the collective root"
        rank, world_size = hello["rank"], hello.get("world_size")
        if self.closed:
            return f"rank {rank}: collective root of job {self.job_id!r} already closed"
        if hello.get("job_id") != self.job_id:
            return f"rank {rank} asked for job {hello.get('job_id')!r}, this root serves {self.job_id!r}"
        if not isinstance(rank, int) or not isinstance(world_size, int) or not 0 < rank < world_size:
            return f"invalid rank {rank!r} for world size {world_size!r}"
        if rank in self.peers:
            return f"rank {rank} connected twice to job {self.job_id!r}"
        return None

    async def shutdown(self, error: str | None = None) -> None:
        """Stop listening; tell parked peers ``error`` and drop them (when rank 0 will not take them)."""
        self.closed = True
        if _ROOTS.get(self.job_id) is self:
            del _ROOTS[self.job_id]
        if self.listener is not None:
            self.listener.stop()
            self.listener = None
        if error is not None:
            peers, self.peers = self.peers, {}
            await _notify_and_close(peers.values(), {"error": error})


# job_id -> _Rendezvous, in this worker process; touched only on the worker's event loop.
_ROOTS: dict[str, _Rendezvous] = {}


async def _notify_and_close(comms, msg) -> None:
    async def one(comm):
        try:
            await asyncio.wait_for(comm.write(msg), _SHORT_TIMEOUT)
            await asyncio.wait_for(comm.close(), _SHORT_TIMEOUT)
        except Exception:
            comm.abort()

    await asyncio.gather(*(one(c) for c in comms))


class _Context:
    """The event loop a communicator runs its comms on, and the security settings for them."""

    def __init__(self, loop=None):
        worker = None
        try:
            from distributed import get_worker

            worker = get_worker()
        except ValueError:
            if loop is None:
                raise RuntimeError(
                    "Dask collectives must be set up inside a Dask task (they use the worker's "
                    "event loop); outside a worker, pass loop= (a running event loop of another thread)"
                ) from None
        if loop is None:
            loop = worker.loop
        self.loop = getattr(loop, "asyncio_loop", loop)  # tornado IOLoop -> asyncio loop
        self.worker_address = worker.address if worker is not None else None
        if worker is not None:
            self.security = worker.security
        else:
            from distributed.security import Security

            self.security = Security()

    def run(self, coro, timeout: float):
        """Run ``coro`` on the event loop from this (task) thread and wait for its result.

        The coroutine enforces its own deadline; ``timeout`` here is a backstop for a loop that
        stopped answering (blocked, or the worker shutting down).
        """
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            coro.close()
            raise RuntimeError(
                "a Dask collective was called from the worker's event loop thread; call it from "
                "the task's own thread (a plain synchronous task function)"
            )
        if self.loop.is_closed():
            coro.close()
            raise RuntimeError("the worker's event loop is closed (is the worker shutting down?)")
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            if future.done():  # the coroutine's own timeout error: not ours to rename
                raise
            future.cancel()
            raise RuntimeError(f"the worker's event loop did not answer within {timeout:g} s") from None

    def connection_args(self, address: str, listen: bool) -> dict:
        from distributed.comm import parse_address

        if parse_address(address)[0] == "inproc":
            return {}
        if listen:
            return self.security.get_listen_args("worker")
        return self.security.get_connection_args("worker")


def start_root(job_id: str, *, loop=None) -> str:
    """Start the collective root of ``job_id`` on this worker and return its address.

    Run it in a task on rank 0's worker before the training tasks; hand the address to every
    rank's :meth:`DaskCommunicator.connect`. The listener binds the worker's own host (port 0) and
    parks each peer that connects until rank 0's ``connect`` takes them; rank 0's ``connect``
    then stops the listener. If rank 0 never connects, :func:`stop_root` frees it.
    """
    from distributed.comm import get_address_host, listen, parse_address, unparse_host_port

    ctx = _Context(loop)
    if ctx.worker_address is None:
        raise RuntimeError("start_root must run inside a task on rank 0's worker")
    scheme, _ = parse_address(ctx.worker_address)
    if scheme == "inproc":
        listen_address = "inproc://"
    else:
        listen_address = f"{scheme}://{unparse_host_port(get_address_host(ctx.worker_address), 0)}"
    args = ctx.connection_args(ctx.worker_address, listen=True)

    async def start() -> str:
        if job_id in _ROOTS:
            raise ValueError(f"a collective root for job {job_id!r} already runs on this worker")
        rendezvous = _Rendezvous(job_id)
        listener = listen(listen_address, rendezvous.handle, deserialize=True, **args)
        await listener.start()
        rendezvous.listener = listener
        _ROOTS[job_id] = rendezvous
        return listener.contact_address

    return ctx.run(start(), _SHORT_TIMEOUT * 3)


def stop_root(job_id: str, *, loop=None) -> bool:
    """Stop ``job_id``'s root on this worker if it still listens (rank 0 never connected); True if it did."""
    ctx = _Context(loop)

    async def stop() -> bool:
        rendezvous = _ROOTS.get(job_id)
        if rendezvous is None:
            return False
        await rendezvous.shutdown(error=f"collective root of job {job_id!r} was stopped before rank 0 connected")
        return True

    return ctx.run(stop(), _SHORT_TIMEOUT * 3)


# ---------------------------------------------------------------------------------------------
# Dask comms: the communicator


class _PeerFailure(Exception):
    def __init__(self, rank: int, message: str):
        super().__init__(message)
        self.rank = rank
        self.message = message


def _unwrap(payload, by_reference: bool):
    """The object a message carried, as this rank's own copy."""
    from distributed.protocol import ToPickle, pickle

    if isinstance(payload, ToPickle):
        payload = payload.data
    if by_reference:
        # In-process (inproc://) comms hand over the sender's object itself: copy it, or ranks
        # sharing a process would share (and could mutate) one another's arrays.
        payload = pickle.loads(pickle.dumps(payload))
    return payload


class DaskCommunicator(Communicator):
    """Collectives over Dask comms: a star through rank 0, reductions in rank order.

    Build it with :meth:`connect` inside the training task. Every collective is a gather to
    rank 0 then a send of the one result back: each message carries the operation and its
    sequence number, so ranks that call different collectives fail with a clear mismatch
    instead of exchanging wrong data. After any failure the communicator is broken: every
    later call raises the same error; call :meth:`close` (or :meth:`abort`) to free sockets.

    Thread use: the collectives and ``close`` are called from the task's thread (never from the
    worker's event loop), one call at a time; the comms themselves run on the worker's loop.
    """

    def __init__(self, rank: int, world_size: int, ctx: _Context, timeout: float, *,
                 peers: dict | None = None, root_comm=None, addresses: list | None = None):
        self.rank = rank
        self.world_size = world_size
        self.timeout = timeout
        self.addresses = addresses or [None] * world_size  # each rank's worker, to name it in errors
        self._ctx = ctx
        self._peers = peers or {}  # rank 0: rank -> comm
        self._root = root_comm  # other ranks: the comm to rank 0
        self._seq = 0
        self._failed: str | None = None
        self._dead: dict[int, str] = {}  # rank 0: peers whose result could not be delivered
        self._closed = False
        self._lock = threading.Lock()
        some_comm = root_comm if root_comm is not None else next(iter(self._peers.values()), None)
        self._by_reference = str(getattr(some_comm, "peer_address", "")).startswith("inproc://")

    # -- bootstrap --------------------------------------------------------------------------

    @classmethod
    def connect(cls, job_id: str, root_address: str | None, rank: int, world_size: int,
                timeout: float | None = None, *, connect_timeout: float | None = None,
                loop=None) -> Communicator:
        """Join job ``job_id`` as ``rank`` of ``world_size``; returns when all ranks have joined.

        Rank 0 must run on the worker where :func:`start_root` ran; it waits (up to ``timeout``)
        for the other ``world_size - 1`` ranks to connect, then stops the listener. With
        ``world_size == 1`` no socket is opened and a :class:`LocalCommunicator` comes back.
        ``timeout`` bounds every collective (None: $DASKGB_COLLECTIVE_TIMEOUT or 600 s);
        ``connect_timeout`` bounds this wait for all ranks to join (None: ``timeout``).
        """
        if not isinstance(world_size, int) or world_size < 1:
            raise ValueError(f"world_size must be a positive int, got {world_size!r}")
        if not isinstance(rank, int) or not 0 <= rank < world_size:
            raise ValueError(f"rank {rank!r} is not in 0..{world_size - 1}")
        timeout = resolve_timeout(timeout)
        connect_timeout = timeout if connect_timeout is None else resolve_timeout(connect_timeout)
        if world_size == 1:
            if job_id in _ROOTS:
                stop_root(job_id, loop=loop)
            return LocalCommunicator()
        ctx = _Context(loop)
        if rank == 0:
            peers, addresses = ctx.run(cls._accept(job_id, world_size, connect_timeout, ctx.worker_address),
                                       connect_timeout + _SHORT_TIMEOUT * 3)
            return cls(0, world_size, ctx, timeout, peers=peers, addresses=addresses)
        if not root_address:
            raise ValueError(f"rank {rank} needs the root address that start_root returned")
        args = ctx.connection_args(root_address, listen=False)
        comm, addresses = ctx.run(
            cls._join(job_id, root_address, rank, world_size, connect_timeout, args, ctx.worker_address),
            connect_timeout + _SHORT_TIMEOUT * 3)
        return cls(rank, world_size, ctx, timeout, root_comm=comm, addresses=addresses)

    @staticmethod
    async def _accept(job_id: str, world_size: int, timeout: float, address: str | None):
        rendezvous = _ROOTS.get(job_id)
        if rendezvous is None:
            raise RuntimeError(
                f"rank 0: no collective root for job {job_id!r} in this worker process; run "
                "start_root(job_id) in a task on this same worker first"
            )
        expected = set(range(1, world_size))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            rendezvous.changed.clear()  # before looking: a connection landing now sets it again
            wrong = {r: n for r, n in rendezvous.world_sizes.items() if n != world_size or r not in expected}
            if wrong:
                error = f"rank 0 expects world size {world_size}, but ranks announced {wrong} (rank: world size)"
                await rendezvous.shutdown(error=error)
                raise RuntimeError(error)
            missing = sorted(expected - set(rendezvous.peers))
            if not missing:
                break
            left = deadline - loop.time()
            if left <= 0:
                error = (f"rank 0: timed out after {timeout:g} s waiting for ranks {missing} of job "
                         f"{job_id!r} to connect (have their tasks started?)")
                await rendezvous.shutdown(error=error)
                raise RuntimeError(error)
            try:
                await asyncio.wait_for(rendezvous.changed.wait(), left)
            except asyncio.TimeoutError:
                pass
        peers = dict(sorted(rendezvous.peers.items()))
        addresses = [address] + [rendezvous.addresses.get(r) for r in range(1, world_size)]
        rendezvous.peers = {}
        await rendezvous.shutdown()
        # Welcome everybody: connect() is a barrier, and a wrong setup fails here, not mid-training.
        welcome = {"welcome": job_id, "addresses": addresses}
        try:
            await asyncio.wait_for(asyncio.gather(*(comm.write(welcome) for comm in peers.values())), timeout)
        except Exception as exc:
            await _notify_and_close(peers.values(), {"error": f"rank 0 could not welcome every rank: {exc!r}"})
            raise RuntimeError(f"rank 0: a rank of job {job_id!r} dropped while joining: {exc!r}") from exc
        return peers, addresses

    @staticmethod
    async def _join(job_id: str, root_address: str, rank: int, world_size: int, timeout: float, args: dict,
                    address: str | None):
        from distributed.comm import CommClosedError, connect

        async def join():
            comm = await connect(root_address, timeout=timeout, **args)
            await comm.write({"job_id": job_id, "rank": rank, "world_size": world_size, "address": address})
            return comm, await comm.read()

        try:
            comm, reply = await asyncio.wait_for(join(), timeout + _PEER_GRACE)
        except asyncio.TimeoutError:
            raise RuntimeError(f"rank {rank}: timed out after {timeout:g} s joining job {job_id!r} "
                               f"at rank 0 ({root_address})") from None
        except (CommClosedError, OSError) as exc:
            raise RuntimeError(f"rank {rank}: could not join job {job_id!r} at rank 0 ({root_address}): "
                               f"{exc}") from exc
        if isinstance(reply, dict) and reply.get("welcome") == job_id:
            return comm, reply["addresses"]
        comm.abort()
        error = reply.get("error") if isinstance(reply, dict) else None
        raise RuntimeError(error or f"rank {rank}: unexpected reply from rank 0 ({root_address}): {reply!r}")

    # -- collectives ------------------------------------------------------------------------

    def allreduce(self, x, op: str = "sum", *, out=None):
        _check_op(op)
        _check_reducible(x, op)
        if _is_cupy(x):
            import cupy

            with x.device:
                return _into(out, cupy.asarray(self.allreduce(cupy.asnumpy(x), op)))
        result = self._collective(f"allreduce({op})", x, functools.partial(reduce_in_rank_order, op=op))
        if isinstance(result, np.ndarray) and not result.flags.writeable:
            result = result.copy()
        return _into(out, result)

    def allgather(self, obj) -> list:
        return self._collective("allgather", obj, list)

    def broadcast(self, obj, root: int = 0):
        if not isinstance(root, int) or not 0 <= root < self.world_size:
            raise ValueError(f"broadcast root {root!r} is not in 0..{self.world_size - 1}")
        payload = obj if self.rank == root else None
        return self._collective(f"broadcast(root={root})", payload, operator.itemgetter(root))

    def _collective(self, kind: str, payload, combine):
        if not self._lock.acquire(blocking=False):
            raise RuntimeError(f"rank {self.rank}: two collectives at once on one communicator; "
                               "call them from one thread, one at a time")
        try:
            if self._closed:
                raise RuntimeError(f"rank {self.rank}: {kind} on a closed communicator")
            if self._failed is not None:
                raise RuntimeError(self._failed)
            self._seq += 1
            try:
                return self._run_collective(self._seq, kind, payload, combine)
            except BaseException as exc:
                # The ranks may now be out of step: no later collective can be trusted.
                if self._failed is None:
                    self._failed = f"{kind} #{self._seq} failed on rank {self.rank}: {exc!r}"
                # The round that training was in (booster.train sets it), for the caller's message.
                if getattr(self, "training_round", None) is not None and not hasattr(exc, "daskgb_round"):
                    try:
                        exc.daskgb_round = self.training_round
                    except AttributeError:
                        pass
                raise
        finally:
            self._lock.release()

    def _run_collective(self, seq: int, kind: str, payload, combine):
        wait = self.timeout + _SHORT_TIMEOUT * 3
        if self.rank != 0:
            return self._ctx.run(self._exchange(seq, kind, payload), wait)
        values = self._ctx.run(self._gather(seq, kind), wait)
        values[0] = payload
        try:
            result = combine(values)  # in this thread: keep the event loop free
        except Exception as exc:
            self._failed = f"{kind} #{seq} failed on rank 0: {exc}"
            self._ctx.run(self._scatter(seq, error=self._failed), wait)
            raise RuntimeError(self._failed) from exc
        self._ctx.run(self._scatter(seq, result=result), wait)
        return result

    def _peer_name(self, rank: int) -> str:
        address = self.addresses[rank]
        return f"rank {rank} (worker {address})" if address else f"rank {rank}"

    async def _recv(self, rank: int, seq: int, kind: str):
        from distributed.comm import CommClosedError

        try:
            msg = await self._peers[rank].read()
        except (CommClosedError, OSError):
            raise _PeerFailure(rank, f"{self._peer_name(rank)} died or closed its connection") from None
        except Exception as exc:
            raise _PeerFailure(rank, f"could not read {self._peer_name(rank)}'s message in {kind} #{seq}: "
                                     f"{exc!r}") from None
        if not isinstance(msg, dict):
            raise _PeerFailure(rank, f"{self._peer_name(rank)} sent a malformed message in {kind} #{seq}")
        if "abort" in msg:
            raise _PeerFailure(rank, f"{self._peer_name(rank)} failed: {msg['abort']}")
        if msg.get("seq") != seq or msg.get("kind") != kind:
            raise _PeerFailure(rank, f"collective mismatch: rank 0 called {kind} #{seq}, "
                                     f"{self._peer_name(rank)} called {msg.get('kind')} #{msg.get('seq')}")
        return _unwrap(msg.get("payload"), self._by_reference)

    async def _gather(self, seq: int, kind: str) -> list:
        if self._dead:
            rank = min(self._dead)
            await self._fail(f"{kind} #{seq}: {self._dead[rank]}", exclude={rank}, tasks={})
        tasks = {r: asyncio.ensure_future(self._recv(r, seq, kind)) for r in self._peers}
        done, pending = await asyncio.wait(tasks.values(), timeout=self.timeout,
                                           return_when=asyncio.FIRST_EXCEPTION)
        failures = sorted((t.exception() for t in done if t.exception() is not None), key=lambda e: e.rank)
        if failures:
            first = failures[0]
            message = first.message if first.message.startswith("collective mismatch") else \
                f"{kind} #{seq}: {first.message}"
            await self._fail(message, exclude={f.rank for f in failures}, tasks=tasks)
        if pending:
            late = sorted(r for r, t in tasks.items() if t in pending)
            names = ", ".join(self._peer_name(r) for r in late)
            await self._fail(f"{kind} #{seq}: timed out after {self.timeout:g} s waiting for {names}",
                             exclude=set(late), tasks=tasks)
        values = [None] * self.world_size
        for r, t in tasks.items():
            values[r] = t.result()
        return values

    async def _fail(self, message: str, exclude: set, tasks: dict) -> None:
        """Rank 0 after a failure: tell every rank, let the healthy ranks' messages land, raise.

        The ranks at fault (``exclude``) are told too: a hung rank reads it when it wakes up.
        """
        self._failed = message

        async def tell(comm):
            try:
                await asyncio.wait_for(comm.write({"error": message}), _SHORT_TIMEOUT)
            except Exception:
                pass

        await asyncio.gather(*(tell(c) for r, c in self._peers.items() if r not in self._dead))
        healthy = [t for r, t in tasks.items() if not t.done() and r not in exclude]
        if healthy:
            await asyncio.wait(healthy, timeout=_DRAIN_GRACE)
        for task in tasks.values():
            if not task.done():
                task.cancel()
            elif not task.cancelled():
                task.exception()  # retrieved, so asyncio does not log it as lost
        raise RuntimeError(message)

    async def _scatter(self, seq: int, result=None, error: str | None = None) -> None:
        from distributed.protocol import ToPickle

        msg = {"seq": seq, "error": error} if error is not None else {"seq": seq, "result": ToPickle(result)}

        async def send(rank, comm):
            try:
                await comm.write(msg)
            except Exception as exc:
                # That peer is gone; the others got their result. Say so at the next collective.
                self._dead[rank] = f"{self._peer_name(rank)} died or closed its connection ({exc!r})"

        live = [(r, c) for r, c in self._peers.items() if r not in self._dead]
        try:
            await asyncio.wait_for(asyncio.gather(*(send(r, c) for r, c in live)), self.timeout)
        except asyncio.TimeoutError:
            self._failed = f"collective #{seq}: timed out after {self.timeout:g} s sending the result"
            raise RuntimeError(self._failed) from None

    async def _exchange(self, seq: int, kind: str, payload):
        """A rank other than 0: send this rank's part, wait for rank 0's answer."""
        from distributed.comm import CommClosedError
        from distributed.protocol import ToPickle

        async def exchange():
            try:
                await self._root.write({"seq": seq, "kind": kind, "payload": ToPickle(payload)})
            except (CommClosedError, OSError):
                pass  # rank 0 may have closed after an error it already sent us: read it
            return await self._root.read()

        lost = (f"{kind} #{seq}: rank {self.rank} lost its connection to {self._peer_name(0)}: "
                "rank 0 died or closed its communicator")
        try:
            msg = await asyncio.wait_for(exchange(), self.timeout + _PEER_GRACE)
        except asyncio.TimeoutError:
            self._failed = (f"{kind} #{seq}: rank {self.rank} timed out after {self.timeout:g} s waiting for "
                            f"{self._peer_name(0)}")
            raise RuntimeError(self._failed) from None
        except (CommClosedError, OSError):
            self._failed = lost
            raise RuntimeError(self._failed) from None
        if not isinstance(msg, dict):
            self._failed = f"rank {self.rank}: malformed message from rank 0 in {kind} #{seq}"
        elif msg.get("error") is not None:
            self._failed = msg["error"]
        elif msg.get("seq") != seq:
            self._failed = f"rank {self.rank}: rank 0 answered collective #{msg.get('seq')} to {kind} #{seq}"
        else:
            return _unwrap(msg.get("result"), self._by_reference)
        raise RuntimeError(self._failed)

    # -- teardown ---------------------------------------------------------------------------

    def close(self) -> None:
        """Close the comms (idempotent). Call it from the task's thread on every exit path."""
        if self._closed:
            return
        self._closed = True
        comms = list(self._peers.values()) if self.rank == 0 else [self._root]

        async def close_all():
            async def one(comm):
                try:
                    await asyncio.wait_for(comm.close(), _SHORT_TIMEOUT)
                except Exception:
                    comm.abort()

            await asyncio.gather(*(one(c) for c in comms if c is not None))

        try:
            self._ctx.run(close_all(), _SHORT_TIMEOUT * 3)
        except RuntimeError:
            pass  # the loop is gone with the worker, and the sockets with it

    def abort(self, reason: str) -> None:
        """Tell the other ranks this one failed (so they raise naming it), then close."""
        if self._closed:
            return
        if self._failed is None:
            self._failed = f"rank {self.rank} aborted: {reason}"
            if self.rank == 0:
                msg, comms = {"error": f"rank 0 failed: {reason}"}, list(self._peers.values())
            else:
                msg, comms = {"abort": reason}, [self._root]

            async def tell():
                async def one(comm):
                    try:
                        await asyncio.wait_for(comm.write(msg), _SHORT_TIMEOUT)
                    except Exception:
                        pass

                await asyncio.gather(*(one(c) for c in comms))

            try:
                self._ctx.run(tell(), _SHORT_TIMEOUT * 3)
            except RuntimeError:
                pass
        self.close()


# ---------------------------------------------------------------------------------------------
# NCCL


_NCCL_DTYPES = {  # numpy dtype -> name of the cupy.cuda.nccl constant
    np.dtype(np.int8): "NCCL_INT8",
    np.dtype(np.uint8): "NCCL_UINT8",
    np.dtype(np.int32): "NCCL_INT32",
    np.dtype(np.uint32): "NCCL_UINT32",
    np.dtype(np.int64): "NCCL_INT64",
    np.dtype(np.uint64): "NCCL_UINT64",
    np.dtype(np.float16): "NCCL_FLOAT16",
    np.dtype(np.float32): "NCCL_FLOAT32",
    np.dtype(np.float64): "NCCL_FLOAT64",
}
_NCCL_OPS = {"sum": "NCCL_SUM", "max": "NCCL_MAX", "min": "NCCL_MIN"}


# NCCL communicators kept between fits, one per device: a fit on the same worker processes
# and devices, in the same rank order, takes the communicator the last one left instead of
# making its own. On 4 x H200 a fit otherwise paid ~75 ms of ncclCommInitRank, ~0.3 s of
# connections made at its first collectives and ~0.45 s of ncclCommDestroy
# (ci/stamp_rounds.py), most of a short fit's multi-GPU overhead. A communicator is kept
# only after a fit that ended cleanly; one that was interrupted or aborted is never
# reused. DASKGB_KEEP_NCCL=0 destroys each fit's communicator at its end;
# release_kept_nccl() destroys the kept ones (their buffers hold device memory).
KEEP_NCCL = os.environ.get("DASKGB_KEEP_NCCL", "1") != "0"
_KEPT: dict = {}  # device -> (key: the ranks' [host, pid, device] in rank order as JSON, generation, communicator)
_KEPT_LOCK = threading.Lock()


def _take_kept(device: int):
    with _KEPT_LOCK:
        return _KEPT.pop(device, None)


def _keep(device: int, entry) -> None:
    with _KEPT_LOCK:
        old = _KEPT.pop(device, None)
        _KEPT[device] = entry
    if old is not None:
        _drop(old[2])


def _drop(comm) -> None:
    """Free a kept communicator that will not be used again. Abort, not destroy: destroy
    waits on the peers, which may have dropped theirs already or be gone."""
    try:
        comm.abort()
    except Exception:
        pass


def release_kept_nccl() -> int:
    """Free the NCCL communicators this process keeps between fits; returns how many."""
    with _KEPT_LOCK:
        kept = list(_KEPT.values())
        _KEPT.clear()
    for entry in kept:
        _drop(entry[2])
    return len(kept)


class NcclCommunicator(Communicator):
    """GPU collectives: cupy arrays through NCCL, everything else through ``host_comm``.

    Every rank builds it at the same point (it is itself a collective): rank 0 makes the NCCL
    unique id and broadcasts it over ``host_comm``; each rank joins on its *current* CUDA
    device, which must be set (``cupy.cuda.Device(i).use()``) before.

    ``allreduce`` of a cupy array returns a new array on that device, enqueued on the current
    stream (no host sync). NCCL's float sums are not in rank order, so they may differ in the
    last bits from run to run; integer sums are exact. That is why GPU histograms are int64
    fixed point: their allreduce is deterministic. NCCL environment variables are left as the
    machine sets them.

    Failures: host-side collectives fail fast as in :class:`DaskCommunicator`. An NCCL kernel
    whose peer died or hangs waits on the GPU, and the host with it, at its next wait for the
    device. Two things release it, both through ``ncclCommAbort``: ``interrupt(reason)``,
    which another thread may call (the Dask layer does, from the worker's event loop, when the
    client sees a rank's worker die), and a watchdog thread that interrupts when an NCCL call
    has not completed ``timeout`` seconds after it was enqueued (``timeout``: the host
    communicator's, i.e. ``DASKGB_COLLECTIVE_TIMEOUT`` or 600 s). After an interrupt every
    collective raises the reason. ``close()`` destroys the NCCL communicator and closes
    ``host_comm``.
    """

    reduces_on_device = True
    # How often the watchdog looks at the oldest NCCL call not yet done.
    WATCH_INTERVAL_S = 0.5

    def __init__(self, host_comm: Communicator, timeout: float | None = None):
        self.host_comm = host_comm
        self.rank = host_comm.rank
        self.world_size = host_comm.world_size
        self._comm = None
        self._device = None
        self._interrupted: str | None = None
        self._lock = threading.Lock()
        self._pending: collections.deque = collections.deque()  # (done event, enqueued at, description)
        self._stop = threading.Event()
        self._watchdog = None
        self.timeout = resolve_timeout(timeout if timeout is not None else getattr(host_comm, "timeout", None))
        # What went through NCCL, for reports: calls and bytes reduced.
        self.nccl_allreduce_calls = 0
        self.nccl_allreduce_bytes = 0
        self.reused = False  # the NCCL communicator is one an earlier fit kept (KEEP_NCCL)
        self._key = self._generation = None
        if self.world_size == 1:
            return
        import cupy
        from cupy.cuda import nccl

        self._nccl = nccl
        self._device = cupy.cuda.runtime.getDevice()
        # Every rank offers the communicator it kept from an earlier fit (taken out of the
        # keep, so that no concurrent fit takes it too); it is used only if every rank offers
        # one of the same making, among the same processes and devices in the same order.
        offered = _take_kept(self._device) if KEEP_NCCL else None
        me = [socket.gethostname(), os.getpid(), int(self._device)]
        try:
            views = host_comm.allgather([me, None if offered is None else [offered[0], offered[1]]])
        except BaseException:
            if offered is not None:
                _drop(offered[2])
            raise
        # As text: the host collectives may hand tuples back as lists.
        self._key = json.dumps([list(v[0]) for v in views])
        if offered is not None and all(v[1] is not None and list(v[1]) == [self._key, offered[1]] for v in views):
            self._comm, self._generation, self.reused = offered[2], offered[1], True
        else:
            if offered is not None:
                _drop(offered[2])
            if self.rank == 0:
                try:
                    uid = ("ok", (nccl.get_unique_id(), uuid.uuid4().hex))
                except Exception as exc:
                    uid = ("error", f"rank 0 could not make an NCCL unique id: {exc!r}")
            else:
                uid = None
            status, uid = host_comm.broadcast(uid, root=0)
            if status != "ok":
                raise RuntimeError(uid)
            uid, self._generation = uid
            try:
                self._comm = nccl.NcclCommunicator(self.world_size, uid, self.rank)
            except Exception as exc:
                raise RuntimeError(f"rank {self.rank}: NCCL communicator init failed on device "
                                   f"{self._device}: {exc}") from exc
        self._watchdog = threading.Thread(target=self._watch, name=f"daskgb-nccl-watchdog-{self.rank}", daemon=True)
        self._watchdog.start()

    def interrupt(self, reason: str) -> None:
        """Abort the NCCL communicator from any thread: a kernel waiting on a peer returns, and
        every later collective raises ``reason``. No host I/O (safe on the event loop)."""
        with self._lock:
            if self._interrupted is not None:
                return
            self._interrupted = f"rank {self.rank}: {reason}"
            comm, self._comm = self._comm, None
        if comm is not None:
            try:
                comm.abort()
            except Exception:
                pass
        self._stop.set()

    def _watch(self) -> None:
        """The watchdog thread: interrupt when the oldest NCCL call is not done after timeout."""
        import cupy

        with cupy.cuda.Device(self._device):
            while not self._stop.wait(self.WATCH_INTERVAL_S):
                while True:
                    with self._lock:
                        oldest = self._pending[0] if self._pending else None
                    if oldest is None:
                        break
                    event, enqueued, what = oldest
                    try:
                        done = event.done
                    except Exception:  # the context is going away with the worker
                        return
                    if done:
                        with self._lock:
                            if self._pending and self._pending[0] is oldest:
                                self._pending.popleft()
                        continue
                    waited = time.monotonic() - enqueued
                    if waited > self.timeout:
                        self.interrupt(f"{what} was not done {waited:.0f} s after it was enqueued (timeout "
                                       f"{self.timeout:g} s): another rank is stuck or gone")
                        return
                    break

    def _check_interrupted(self) -> None:
        if self._interrupted is not None:
            raise RuntimeError(self._interrupted)

    def allreduce(self, x, op: str = "sum", *, out=None):
        _check_op(op)
        comm = self._comm  # once: interrupt() may clear it from another thread
        self._check_interrupted()
        if comm is None:
            _check_reducible(x, op)
            return _into(out, x)
        if not _is_cupy(x):
            return self.host_comm.allreduce(x, op, out=out)
        import cupy

        if x.dtype not in _NCCL_DTYPES:
            raise TypeError(f"NCCL allreduce supports {sorted(str(d) for d in _NCCL_DTYPES)}, got {x.dtype}")
        if x.device.id != self._device:
            raise ValueError(f"rank {self.rank}: array on device {x.device.id}, NCCL communicator on "
                             f"device {self._device}")
        with cupy.cuda.Device(self._device):
            src = cupy.ascontiguousarray(x)
            if out is None:
                out = cupy.empty_like(src)
            elif not (_is_cupy(out) and out.shape == src.shape and out.dtype == src.dtype
                      and out.flags.c_contiguous and out.device.id == self._device):
                raise ValueError(f"allreduce out= must be a C-contiguous array of shape {src.shape} and dtype "
                                 f"{src.dtype} on device {self._device}")
            if src.size:
                stream = cupy.cuda.get_current_stream()
                comm.allReduce(src.data.ptr, out.data.ptr, src.size, getattr(self._nccl, _NCCL_DTYPES[src.dtype]),
                               getattr(self._nccl, _NCCL_OPS[op]), stream.ptr)
                self.nccl_allreduce_calls += 1
                self.nccl_allreduce_bytes += src.nbytes
                if not stream.is_capturing():  # a captured call is watched as part of its graph's replay
                    self.track(f"NCCL allreduce #{self.nccl_allreduce_calls} ({src.nbytes} bytes)")
        return out

    def track(self, what: str) -> None:
        """Have the watchdog wait for the work queued so far on the current stream (an NCCL
        call, or a CUDA graph's replay holding some), described as `what` if it times out."""
        import cupy

        if self._comm is None:
            return
        with cupy.cuda.Device(self._device):
            done = cupy.cuda.Event(block=False, disable_timing=True)
            done.record(cupy.cuda.get_current_stream())
        with self._lock:
            self._pending.append((done, time.monotonic(), what))

    def allgather(self, obj) -> list:
        self._check_interrupted()
        return self.host_comm.allgather(obj)

    def broadcast(self, obj, root: int = 0):
        self._check_interrupted()
        return self.host_comm.broadcast(obj, root)

    def _stop_watchdog(self) -> None:
        self._stop.set()
        if self._watchdog is not None and self._watchdog is not threading.current_thread():
            self._watchdog.join(timeout=5)

    def close(self) -> None:
        """End the fit: the NCCL communicator is kept for the next fit on the same ranks (see
        KEEP_NCCL; the one kept before on this device is dropped), or destroyed."""
        self._stop_watchdog()
        with self._lock:
            comm, self._comm = self._comm, None
        if comm is not None:
            if KEEP_NCCL and self._key is not None and self._interrupted is None:
                _keep(self._device, (self._key, self._generation, comm))
            else:
                comm.destroy()
        self.host_comm.close()

    def abort(self, reason: str) -> None:
        self._stop_watchdog()
        with self._lock:
            comm, self._comm = self._comm, None
        if comm is not None:
            comm.abort()
        self.host_comm.abort(self._interrupted or reason)
