"""Collectives over Dask's comms for CPU workers: a star through rank 0 that reduces in rank order, and its rendezvous.

Rank 0 gathers every contribution, reduces in rank order (``x0 + x1 + x2 ...``) and sends the
one result to everybody, so results are bit-identical on every rank and the same from run to
run. The comms are Dask's (TCP/TLS/UCX frames), run on the worker's event loop.

Bootstrap of a Dask job (both steps run inside tasks)::

    addr = client.submit(start_root, job_id, workers=[w0], pure=False).result()
    # then, in the training task of each rank, pinned to its worker:
    with DaskCommunicator.connect(job_id, addr, rank, world_size) as comm:
        ...

The rendezvous of a job lives in the collective state of rank 0's worker (collective/state.py)
from start_root until rank 0 connects (or stop_root, or the worker's plugin's teardown).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import operator
import secrets
import threading
import time

import numpy as np

from .. import config
from . import sockets
from .base import Communicator, check_op, check_reducible, is_cupy, reduce_in_rank_order, resolve_timeout, write_into
from .local import LocalCommunicator
from .state import current_worker, state_of

# Extra time a waiting peer gives rank 0 past the common deadline, so that when a third rank
# hangs, the peer receives rank 0's message naming it rather than timing out first itself.
_PEER_GRACE = 5.0
# How long rank 0, after a failure, keeps reading the other peers' messages already on their
# way: closing a socket with unread data resets it, which could lose our error message.
_DRAIN_GRACE = 2.0
# Messages that are not the collective itself (hello, error notices, close) are small.
_SHORT_TIMEOUT = 10.0


# ---------------------------------------------------------------------------------------------
# Bootstrap


class _Rendezvous:
    """Rank 0's listener of one job and the peers' comms it has parked, until rank 0 connects."""

    def __init__(self, job_id: str, roots: dict):
        self.job_id = job_id
        self.roots = roots  # the collective state's rendezvous by job (collective/state.py), this one among them
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
        if self.roots.get(self.job_id) is self:
            del self.roots[self.job_id]
        if self.listener is not None:
            self.listener.stop()
            self.listener = None
        if error is not None:
            peers, self.peers = self.peers, {}
            await _notify_and_close(peers.values(), {"error": error})


async def _notify_and_close(comms, msg) -> None:
    async def one(comm):
        try:
            await asyncio.wait_for(comm.write(msg), _SHORT_TIMEOUT)
            await asyncio.wait_for(comm.close(), _SHORT_TIMEOUT)
        except Exception:
            comm.abort()

    await asyncio.gather(*(one(c) for c in comms))


class _Context:
    """The event loop a communicator runs its comms on, the security settings for them, and the
    collective state the job's rendezvous lives in (the worker's, else the process's)."""

    def __init__(self, loop=None):
        worker = current_worker()
        if worker is None and loop is None:
            raise RuntimeError(
                "Dask collectives must be set up inside a Dask task (they use the worker's "
                "event loop); outside a worker, pass loop= (a running event loop of another thread)"
            )
        self.state = state_of(worker)
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

    roots = ctx.state.roots

    async def start() -> str:
        if job_id in roots:
            raise ValueError(f"a collective root for job {job_id!r} already runs on this worker")
        rendezvous = _Rendezvous(job_id, roots)
        listener = listen(listen_address, rendezvous.handle, deserialize=True, **args)
        await listener.start()
        rendezvous.listener = listener
        roots[job_id] = rendezvous
        return listener.contact_address

    return ctx.run(start(), _SHORT_TIMEOUT * 3)


def stop_root(job_id: str, *, loop=None) -> bool:
    """Stop ``job_id``'s root on this worker if it still listens (rank 0 never connected); True if it did."""
    ctx = _Context(loop)

    async def stop() -> bool:
        rendezvous = ctx.state.roots.get(job_id)
        if rendezvous is None:
            return False
        await rendezvous.shutdown(error=f"collective root of job {job_id!r} was stopped before rank 0 connected")
        return True

    return ctx.run(stop(), _SHORT_TIMEOUT * 3)


def _close_comms(ctx: _Context, comms) -> None:
    """Close Dask comms from the task's thread (the ranks' joining comms, once the links carry the rest)."""
    async def close_all():
        async def one(comm):
            try:
                await asyncio.wait_for(comm.close(), _SHORT_TIMEOUT)
            except Exception:
                comm.abort()

        await asyncio.gather(*(one(c) for c in comms if c is not None))

    try:
        ctx.run(close_all(), _SHORT_TIMEOUT * 3)
    except RuntimeError:
        pass  # the loop is gone with the worker, and the sockets with it


def _direct_listener(worker_address: str | None):
    """Rank 0's listening socket for the direct links on its worker's host; None where the
    cluster's comms are not plain TCP (TLS, UCX, inproc: Dask's comms carry the collectives)."""
    from distributed.comm import get_address_host, parse_address

    if worker_address is None or parse_address(worker_address)[0] != "tcp":
        return None
    return sockets.open_listener(get_address_host(worker_address))


def _accept_links(listener, job_id: str, world_size: int, token: str, addresses: list, deadline: float) -> dict:
    """Rank 0: every other rank's direct link (rank -> socket), each rank's hello checked
    against the job's token; a barrier, as joining is."""
    import socket

    links: dict = {}
    try:
        while len(links) < world_size - 1:
            listener.settimeout(sockets.left(deadline))
            try:
                sock, _ = listener.accept()
            except socket.timeout:
                missing = sorted(set(range(1, world_size)) - set(links))
                raise RuntimeError(f"rank 0: timed out waiting for ranks {missing} of job {job_id!r} to open "
                                   f"their direct links to {listener.getsockname()[:2]}") from None
            sockets.tune(sock)
            try:
                hello = sockets.recv(sock, min(deadline, time.monotonic() + _SHORT_TIMEOUT))
            except sockets.LinkError:
                sock.close()
                continue
            rank = hello.get("rank") if isinstance(hello, dict) else None
            if (hello.get("token") if isinstance(hello, dict) else None) != token or \
                    not isinstance(rank, int) or not 0 < rank < world_size or rank in links:
                sock.close()  # not one of this job's ranks
                continue
            links[rank] = sock
        for sock in links.values():
            sockets.send(sock, {"linked": job_id}, deadline)
    except BaseException as exc:
        for sock in links.values():
            sock.close()
        if isinstance(exc, sockets.LinkError):
            raise RuntimeError(f"rank 0: a rank of job {job_id!r} dropped its direct link while joining: "
                               f"{exc}") from None
        raise
    return dict(sorted(links.items()))


def _open_link(offer: dict, job_id: str, rank: int, deadline: float):
    """A rank other than 0: its direct link to rank 0, once rank 0 has taken every rank's."""
    import socket

    host, port = offer["address"]
    try:
        sock = socket.create_connection((host, port), timeout=sockets.left(deadline))
    except OSError as exc:
        raise RuntimeError(f"rank {rank}: could not open the direct link of job {job_id!r} to rank 0 at "
                           f"{host}:{port}: {exc}") from exc
    sockets.tune(sock)
    try:
        sockets.send(sock, {"job_id": job_id, "rank": rank, "token": offer["token"]}, deadline)
        reply = sockets.recv(sock, deadline)
    except sockets.LinkError as exc:
        sock.close()
        raise RuntimeError(f"rank {rank}: rank 0 of job {job_id!r} did not take its direct link: {exc} "
                           "(did another rank fail to join?)") from None
    if reply != {"linked": job_id}:
        sock.close()
        raise RuntimeError(f"rank {rank}: unexpected reply from rank 0 on its direct link: {reply!r}")
    return sock


# ---------------------------------------------------------------------------------------------
# The communicator


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
                 peers: dict | None = None, root_comm=None, addresses: list | None = None,
                 links: dict | None = None):
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
        # Direct links (sockets.py), where the ranks opened them: rank -> socket (rank 0: every
        # peer's; the others: {0: the link to rank 0}). Every collective then travels on them.
        self._links = links
        some_comm = root_comm if root_comm is not None else next(iter(self._peers.values()), None)
        self._by_reference = str(getattr(some_comm, "peer_address", "")).startswith("inproc://")

    # -- bootstrap --------------------------------------------------------------------------

    @classmethod
    def connect(cls, job_id: str, root_address: str | None, rank: int, world_size: int,
                timeout: float | None = None, *, connect_timeout: float | None = None,
                loop=None, direct: bool | None = None) -> Communicator:
        """Join job ``job_id`` as ``rank`` of ``world_size``; returns when all ranks have joined.

        Rank 0 must run on the worker where :func:`start_root` ran; it waits (up to ``timeout``)
        for the other ``world_size - 1`` ranks to connect, then stops the listener. With
        ``world_size == 1`` no socket is opened and a :class:`LocalCommunicator` comes back.
        ``timeout`` bounds every collective (None: the setting collective.timeout, 600 s by default);
        ``connect_timeout`` bounds this wait for all ranks to join (None: ``timeout``).
        ``direct`` (rank 0 decides for all; None: the setting collective.direct-links): on a
        tcp:// cluster, once joined, each rank opens a plain socket to rank 0 and every
        collective travels on it (sockets.py: a collective costs 50x less latency, 2x less a
        byte); Dask's comms (TLS, UCX, inproc, or direct off) carry them otherwise.
        """
        if not isinstance(world_size, int) or world_size < 1:
            raise ValueError(f"world_size must be a positive int, got {world_size!r}")
        if not isinstance(rank, int) or not 0 <= rank < world_size:
            raise ValueError(f"rank {rank!r} is not in 0..{world_size - 1}")
        timeout = resolve_timeout(timeout)
        connect_timeout = timeout if connect_timeout is None else resolve_timeout(connect_timeout)
        if world_size == 1:
            if job_id in state_of(current_worker()).roots:
                stop_root(job_id, loop=loop)
            return LocalCommunicator()
        ctx = _Context(loop)
        if rank == 0:
            started = time.monotonic()
            if direct is None:
                direct = bool(config.get("collective.direct-links"))
            listener = _direct_listener(ctx.worker_address) if direct else None
            offer = None if listener is None else {"address": listener.getsockname()[:2],
                                                   "token": secrets.token_hex(16)}
            try:
                peers, addresses = ctx.run(cls._accept(job_id, world_size, connect_timeout, ctx.worker_address,
                                                       ctx.state.roots, offer), connect_timeout + _SHORT_TIMEOUT * 3)
                if listener is None:
                    return cls(0, world_size, ctx, timeout, peers=peers, addresses=addresses)
                links = _accept_links(listener, job_id, world_size, offer["token"], addresses,
                                      started + connect_timeout)
            finally:
                if listener is not None:
                    listener.close()
            _close_comms(ctx, peers.values())
            return cls(0, world_size, ctx, timeout, addresses=addresses, links=links)
        if not root_address:
            raise ValueError(f"rank {rank} needs the root address that start_root returned")
        args = ctx.connection_args(root_address, listen=False)
        started = time.monotonic()
        comm, addresses, offer = ctx.run(
            cls._join(job_id, root_address, rank, world_size, connect_timeout, args, ctx.worker_address),
            connect_timeout + _SHORT_TIMEOUT * 3)
        if offer is None:
            return cls(rank, world_size, ctx, timeout, root_comm=comm, addresses=addresses)
        try:
            link = _open_link(offer, job_id, rank, started + connect_timeout + _PEER_GRACE)
        finally:
            _close_comms(ctx, [comm])
        return cls(rank, world_size, ctx, timeout, addresses=addresses, links={0: link})

    @staticmethod
    async def _accept(job_id: str, world_size: int, timeout: float, address: str | None, roots: dict,
                      offer: dict | None = None):
        rendezvous = roots.get(job_id)
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
        welcome = {"welcome": job_id, "addresses": addresses, "direct": offer}
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
            return comm, reply["addresses"], reply.get("direct")
        comm.abort()
        error = reply.get("error") if isinstance(reply, dict) else None
        raise RuntimeError(error or f"rank {rank}: unexpected reply from rank 0 ({root_address}): {reply!r}")

    # -- collectives ------------------------------------------------------------------------

    def allreduce(self, x, op: str = "sum", *, out=None):
        check_op(op)
        check_reducible(x, op)
        if is_cupy(x):
            import cupy

            with x.device:
                return write_into(out, cupy.asarray(self.allreduce(cupy.asnumpy(x), op)))
        result = self._collective(f"allreduce({op})", x, functools.partial(reduce_in_rank_order, op=op))
        if isinstance(result, np.ndarray) and not result.flags.writeable:
            result = result.copy()
        return write_into(out, result)

    def allgather(self, obj) -> list:
        return self._collective("allgather", obj, list)

    def gather_apply(self, obj, fn):
        # The star meets at rank 0 anyway: fn runs there once, and only its result goes back.
        return self._collective("gather_apply", obj, fn)

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
        if self._links is not None:
            return self._run_linked(seq, kind, payload, combine)
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
        return _unwrap(self._result_of(msg, kind, seq), self._by_reference)

    def _result_of(self, msg, kind: str, seq: int):
        """A rank other than 0: rank 0's answer to collective #seq, or its failure raised (and kept)."""
        if not isinstance(msg, dict):
            self._failed = f"rank {self.rank}: malformed message from rank 0 in {kind} #{seq}"
        elif msg.get("error") is not None:
            self._failed = msg["error"]
        elif msg.get("seq") != seq:
            self._failed = f"rank {self.rank}: rank 0 answered collective #{msg.get('seq')} to {kind} #{seq}"
        else:
            return msg.get("result")
        raise RuntimeError(self._failed)

    # -- the same over the direct links (sockets.py), from the task's thread -----------------

    def _run_linked(self, seq: int, kind: str, payload, combine):
        if self.rank != 0:
            return self._exchange_linked(seq, kind, payload)
        values = self._gather_linked(seq, kind)
        values[0] = payload
        try:
            result = combine(values)
        except Exception as exc:
            self._failed = f"{kind} #{seq} failed on rank 0: {exc}"
            self._scatter_linked(seq, error=self._failed)
            raise RuntimeError(self._failed) from exc
        self._scatter_linked(seq, result=result)
        return result

    def _gather_linked(self, seq: int, kind: str) -> list:
        if self._dead:
            rank = min(self._dead)
            self._fail_linked(f"{kind} #{seq}: {self._dead[rank]}", unread={})
        deadline = time.monotonic() + self.timeout
        values = [None] * self.world_size
        unread = {r: s for r, s in self._links.items()}
        while unread:
            rank = sockets.first_readable(unread, deadline)
            if rank is None:
                names = ", ".join(self._peer_name(r) for r in sorted(unread))
                self._fail_linked(f"{kind} #{seq}: timed out after {self.timeout:g} s waiting for {names}",
                                  unread={})
            sock = unread.pop(rank)
            try:
                msg = sockets.recv(sock, deadline)
            except sockets.LinkError as exc:
                if exc.closed:
                    self._fail_linked(f"{kind} #{seq}: {self._peer_name(rank)} died or closed its connection", unread)
                self._fail_linked(f"{kind} #{seq}: timed out after {self.timeout:g} s waiting for "
                                  f"{self._peer_name(rank)}", unread)
            if not isinstance(msg, dict):
                self._fail_linked(f"{kind} #{seq}: {self._peer_name(rank)} sent a malformed message", unread)
            if "abort" in msg:
                self._fail_linked(f"{kind} #{seq}: {self._peer_name(rank)} failed: {msg['abort']}", unread)
            if msg.get("seq") != seq or msg.get("kind") != kind:
                self._fail_linked(f"collective mismatch: rank 0 called {kind} #{seq}, {self._peer_name(rank)} "
                                  f"called {msg.get('kind')} #{msg.get('seq')}", unread)
            values[rank] = msg.get("payload")
        return values

    def _fail_linked(self, message: str, unread: dict) -> None:
        """Rank 0 after a failure: tell every rank, let the healthy ranks' messages land, raise."""
        self._failed = message
        deadline = time.monotonic() + _SHORT_TIMEOUT
        for rank, sock in self._links.items():
            if rank not in self._dead:
                try:
                    sockets.send(sock, {"error": message}, deadline)
                except sockets.LinkError:
                    pass
        drain = time.monotonic() + _DRAIN_GRACE
        for sock in unread.values():
            try:
                sockets.recv(sock, drain)
            except Exception:
                pass
        raise RuntimeError(message)

    def _scatter_linked(self, seq: int, result=None, error: str | None = None) -> None:
        msg = {"seq": seq, "error": error} if error is not None else {"seq": seq, "result": result}
        deadline = time.monotonic() + self.timeout
        for rank, sock in self._links.items():
            if rank in self._dead:
                continue
            try:
                sockets.send(sock, msg, deadline)
            except sockets.LinkError as exc:
                if not exc.closed:
                    self._failed = f"collective #{seq}: timed out after {self.timeout:g} s sending the result"
                    raise RuntimeError(self._failed) from None
                # That peer is gone; the others got their result. Say so at the next collective.
                self._dead[rank] = f"{self._peer_name(rank)} died or closed its connection ({exc})"

    def _exchange_linked(self, seq: int, kind: str, payload):
        """A rank other than 0: send this rank's part, wait for rank 0's answer."""
        sock = self._links[0]
        deadline = time.monotonic() + self.timeout + _PEER_GRACE
        lost = (f"{kind} #{seq}: rank {self.rank} lost its connection to {self._peer_name(0)}: "
                "rank 0 died or closed its communicator")
        timed_out = f"{kind} #{seq}: rank {self.rank} timed out after {self.timeout:g} s waiting for " \
                    f"{self._peer_name(0)}"
        try:
            sockets.send(sock, {"seq": seq, "kind": kind, "payload": payload}, deadline)
        except sockets.LinkError as exc:
            if not exc.closed:
                self._failed = timed_out
                raise RuntimeError(self._failed) from None
            # rank 0 may have closed after an error it already sent us: read it
        try:
            msg = sockets.recv(sock, deadline)
        except sockets.LinkError as exc:
            self._failed = lost if exc.closed else timed_out
            raise RuntimeError(self._failed) from None
        return self._result_of(msg, kind, seq)

    # -- teardown ---------------------------------------------------------------------------

    def close(self) -> None:
        """Close the comms (idempotent). Call it from the task's thread on every exit path."""
        if self._closed:
            return
        self._closed = True
        if self._links is not None:
            for sock in self._links.values():
                sockets.close(sock)
            return
        _close_comms(self._ctx, list(self._peers.values()) if self.rank == 0 else [self._root])

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
            if self._links is not None:
                deadline = time.monotonic() + _SHORT_TIMEOUT
                for rank, sock in self._links.items():
                    if rank not in self._dead:
                        try:
                            sockets.send(sock, msg, deadline)
                        except sockets.LinkError:
                            pass
                self.close()
                return

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
