"""The collective of a distributed fit: one connection between every two
workers (a Unix socket between two of one machine, TCP otherwise:
:class:`Listener`), and the few exchanges the driver needs
(docs/distributed.md §2).

Why not Dask tasks: a depth needs a handful of exchanges, each a few
milliseconds of work; as scheduled tasks each cost a scheduler round trip
(1-20 ms) and the client in the middle. XGBoost and LightGBM reach the same
conclusion: one long-running task per worker for the whole fit, the workers
talking to each other directly (XGBoost's tracker and allreduce, LightGBM's
own sockets). Dask starts the tasks and tells them where the others listen
(:func:`listen` runs when a worker receives its shard); after that no
message goes through the scheduler or the client.

Ranks are the shards in era order. Every operation is called by every rank
in the same order (the driver's decisions are identical on all ranks), so
the messages need no tags: each connection is a FIFO.

* :meth:`Collective.allreduce` -- sums (exact: fixed-point values) or maxima:
  a small array sent by every rank to every other, each reducing them in
  rank order (one message deep: a depth's many small exchanges wait one
  latency, not two; up to DIRECT_MAX_RANKS ranks, reduced at rank 0 and
  broadcast beyond), a large one around a ring (reduce-scatter, then
  allgather: every rank sends and receives 2 (n - 1) / n of it, where rank 0
  of the star would move 2 (n - 1) whole arrays, the pooled histograms of a
  depth);
* :meth:`Collective.allgather`, :meth:`Collective.broadcast`.

A message is an array of numbers as its dtype, shape and own memory, or any
other value pickled (:func:`_framed`): a depth's pooled cells are not copied
through pickle.

Where a rank sends and receives at once, one loop serves whichever
socket is ready (:meth:`Collective._exchange`): two ranks each sending a
large message to the other would otherwise wait for each other forever.

A peer that fails closes its sockets; the others then get
:class:`PeerLostError` instead of waiting forever.
"""

from __future__ import annotations

import functools
import pickle
import select
import selectors
import socket
import struct
import sys
import time
import uuid

import numpy as np

# How long a rank waits for the others to connect at the start of a fit: a
# worker busy with other tasks starts its fit task late. (A worker that died
# is noticed sooner by the client, which watches the workers.)
CONNECT_TIMEOUT_SECONDS = 600.0
_HEADER = struct.Struct("<Q")
# A message's frame: its kind, then the bytes of its description and of its
# payload. An array (numbers, one dimension or more) travels as its dtype
# and shape (pickled, a few dozen bytes) and its own memory, sent from the
# array and received into a new one: no pickle copies of the depth's pooled
# cells (a pickled 3 MB array took ~6 ms between two processes of one
# machine). Anything else is pickled whole.
_FRAME = struct.Struct("<BQQ")
_PICKLED, _ARRAY = 0, 1
# Arrays of at least this many bytes are all-reduced around the ring (when
# there are more than two ranks; with two, the star moves the same bytes).
RING_MIN_BYTES = 1 << 18
# Up to this many ranks a small array is all-reduced by every rank sending it
# to every other (n - 1 messages each, one latency); beyond, through rank 0.
DIRECT_MAX_RANKS = 16
# A message this small is sent blocking in an exchange: it fits any
# platform's socket buffers (Linux, macOS and Windows keep at least 64 KiB
# in flight), so the send returns whether or not the receiver reads yet.
SMALL_MESSAGE_BYTES = 32 << 10


class PeerLostError(ConnectionError):
    """Another worker of the fit stopped answering (it failed or left)."""


class Listener:
    """Where a rank's peers connect: a TCP socket on ``host`` (any free port)
    and, on Linux, a Unix socket in the abstract namespace (no file to
    remove) for the ranks on the same machine, which moves a depth's pooled
    cells with less work than TCP's loopback (an allreduce between two
    processes of a 2-core VM: 3.2 MB 1.8 against 2.4 ms, 0.5 MB 0.41
    against 0.47 ms; a few dozen bytes alike, ~0.12 ms, the processes'
    wake-ups; benchmarks/bench_collective.py --transports unix tcp). A rank
    elsewhere, or one the Unix socket does not reach (another network
    namespace), connects by TCP."""

    def __init__(self, host: str, local: bool = True):
        self.tcp = socket.create_server((host, 0), backlog=128)
        self.local = self.local_name = None
        if local and LOCAL_SOCKETS:
            name = f"\0packboost-{uuid.uuid4().hex}"
            unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                unix.bind(name)
                unix.listen(128)
            except OSError:
                unix.close()   # no abstract namespace here: TCP only
            else:
                self.local, self.local_name = unix, name

    @property
    def address(self) -> tuple:
        """(host, port, this machine's identity, the Unix socket's name or
        None): what the other ranks dial (:meth:`Collective.connect`)."""
        host, port = self.tcp.getsockname()[:2]
        return host, port, _machine_identity(), self.local_name

    def accept(self, timeout: float) -> socket.socket:
        """The next peer's connection, on either socket."""
        with selectors.DefaultSelector() as selector:
            for listening in (self.tcp, self.local):
                if listening is not None:
                    selector.register(listening, selectors.EVENT_READ)
            ready = selector.select(timeout)
            if not ready:
                raise TimeoutError("no other rank of the fit connected in time")
            connection, _ = ready[0][0].fileobj.accept()
        connection.settimeout(timeout)
        return connection

    def close(self) -> None:
        self.tcp.close()
        if self.local is not None:
            self.local.close()


# Unix sockets in the abstract namespace exist on Linux only.
LOCAL_SOCKETS = sys.platform.startswith("linux") and hasattr(socket, "AF_UNIX")


@functools.cache
def _machine_identity() -> str:
    """This machine and boot: ranks that share it may try the Unix socket
    (a rank another namespace keeps from it falls back to TCP)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as boot:
            boot_id = boot.read().strip()
    except OSError:
        boot_id = ""
    return f"{socket.gethostname()}/{boot_id}"


def listen(host: str, local: bool = True) -> Listener:
    """A :class:`Listener` on ``host``, for :meth:`Collective.connect`
    (``local`` False: TCP only)."""
    return Listener(host, local)


def address_of(listener: Listener) -> tuple:
    return listener.address


def _dial(address, timeout: float) -> socket.socket:
    """A connection to the rank listening at ``address`` (Listener.address):
    over its Unix socket when it is on this machine and reachable, else TCP."""
    host, port, machine, local_name = address
    if local_name is not None and LOCAL_SOCKETS and machine == _machine_identity():
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.settimeout(timeout)
        try:
            connection.connect(local_name)
            return connection
        except OSError:
            connection.close()
    return socket.create_connection((host, port), timeout=timeout)


class Collective:
    """This rank's connections to every other rank of the fit."""

    def __init__(self, rank: int, peers: dict):
        self.rank = rank
        self.size = len(peers) + 1
        self._peers = peers            # rank -> connected socket
        self.bytes_sent = 0
        self.messages_sent = 0
        # Seconds spent waiting for other ranks (blocked in receive): the
        # latency and imbalance the exchanges cost this rank.
        self.seconds_waiting = 0.0
        self._frame = memoryview(bytearray(_FRAME.size))   # reused by receive
        self._poller = None   # made by the first exchange of large messages (_exchange)
        self._rank_of_descriptor = {connection.fileno(): other
                                    for other, connection in peers.items()}

    @classmethod
    def connect(cls, rank: int, addresses: list, listener: socket.socket) -> Collective:
        """Connect rank ``rank`` to every other: it dials the lower ranks and
        accepts the higher ones on ``listener`` (``addresses[r]`` is rank r's)."""
        peers = {}
        try:
            for other in range(rank):
                connection = _dial(addresses[other], CONNECT_TIMEOUT_SECONDS)
                connection.sendall(_HEADER.pack(rank))
                peers[other] = connection
            while len(peers) < len(addresses) - 1:
                connection = listener.accept(CONNECT_TIMEOUT_SECONDS)
                (other,) = _HEADER.unpack(_receive_exactly(connection, _HEADER.size))
                peers[int(other)] = connection
        except (OSError, PeerLostError) as error:
            for connection in peers.values():
                connection.close()
            raise PeerLostError(f"rank {rank} could not reach the other workers of the fit: "
                                f"{error}") from error
        for connection in peers.values():
            # Blocking from here on: a depth may compute for long; a lost peer
            # shows as a closed connection, not as a timeout.
            connection.settimeout(None)
            if connection.family != getattr(socket, "AF_UNIX", None):
                connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(rank, peers)

    def close(self) -> None:
        for connection in self._peers.values():
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            connection.close()
        self._peers = {}

    # -- point to point

    def send(self, other: int, value) -> None:
        parts = _framed(value)
        self._send_parts(other, parts)
        self.bytes_sent += _payload_bytes(parts)
        self.messages_sent += 1

    def _send_parts(self, other: int, parts: list) -> None:
        """A framed message's parts to ``other``, blocking."""
        try:
            for part in parts:
                self._peers[other].sendall(part)
        except OSError as error:
            raise PeerLostError(f"worker of rank {other} is gone ({error})") from None

    def receive(self, other: int):
        connection = self._peers[other]
        start = time.perf_counter()
        frame = _receive_exactly(connection, _FRAME.size, other, into=self._frame)
        kind, described, length = _FRAME.unpack(frame)
        incoming = _Incoming()
        if length <= SMALL_MESSAGE_BYTES:
            # Description and payload in one system call (most of a depth's
            # messages are this small: the calls cost more than the bytes).
            body = memoryview(_receive_exactly(connection, described + length, other))
            incoming.begin(kind, bytes(body[:described]), length)
            incoming.payload[:] = body[described:]
        else:
            incoming.begin(kind, _receive_exactly(connection, described, other), length)
            _receive_exactly(connection, length, other, into=incoming.payload)
        self.seconds_waiting += time.perf_counter() - start
        return incoming.finished()

    # -- collectives (every rank calls them in the same order)

    def broadcast(self, value, root: int = 0):
        if self.size == 1:
            return value
        if self.rank == root:
            for other in range(self.size):
                if other != root:
                    self.send(other, value)
            return value
        return self.receive(root)

    def allgather(self, value) -> list:
        """Every rank's ``value``, in rank order."""
        if self.size == 1:
            return [value]
        if self.size <= DIRECT_MAX_RANKS:
            received = self._exchange(dict.fromkeys(self._others(), value), self._others())
            return [value if other == self.rank else received[other]
                    for other in range(self.size)]
        if self.rank == 0:
            values = [value] + [self.receive(other) for other in range(1, self.size)]
        else:
            self.send(0, value)
            values = None
        return self.broadcast(values, root=0)

    def allreduce(self, array: np.ndarray, operation: str = "sum") -> np.ndarray:
        """``array`` summed (``"sum"``) or maximised (``"max"``, NaN wins)
        over the ranks; every rank gets the same numbers. Sums are added in
        an order that depends on the array's size: give them exact values
        (integers, fixed point) where the result must not depend on it."""
        if operation not in ("sum", "max"):
            raise ValueError(f"operation must be 'sum' or 'max', got {operation!r}")
        if self.size == 1:
            return array
        array = np.asarray(array)
        if self.size > 2 and array.nbytes >= RING_MIN_BYTES:
            return self._ring_allreduce(array, operation)
        if self.size == 2 and array.nbytes <= SMALL_MESSAGE_BYTES:
            # Most of a depth's exchanges: the direct exchange below without
            # its dictionaries and lists (~20 us of a ~70 us exchange's CPU).
            other = 1 - self.rank
            self.send(other, array)
            total = self.receive(other)
            _check_alike(array, [total])
            first, second = (array, total) if self.rank == 0 else (total, array)
            _combine_into(total, first, second, operation)
            return total
        if self.size <= DIRECT_MAX_RANKS:
            # Reduced in rank order on every rank: the same numbers everywhere
            # (also for float sums), as the star's rank 0 adds them.
            parts = self.allgather(array)
            _check_alike(array, parts)
            # Into a received array (this rank's own is the caller's): no
            # copy of a depth's pooled cells. parts[0] with parts[1] first,
            # then the others in rank order; a + b and max(a, b) are the
            # same numbers either way round.
            total = parts[1] if self.rank == 0 else parts[0]
            _combine_into(total, parts[0], parts[1], operation)
            for part in parts[2:]:
                _combine(total, part, operation)
            return total
        if self.rank == 0:
            total = np.array(array, copy=True)
            for other in range(1, self.size):
                _combine(total, self.receive(other), operation)
        else:
            self.send(0, array)
            total = None
        return self.broadcast(total, root=0)

    def _ring_allreduce(self, array: np.ndarray, operation: str) -> np.ndarray:
        """The ring: the array cut into one piece per rank; n - 1 steps in
        which every rank hands a piece on to the next rank and adds the one
        from the previous (after them, rank r holds piece r + 1 reduced over
        all ranks), then n - 1 steps passing the reduced pieces round."""
        n, rank = self.size, self.rank
        flat = np.array(array, copy=True).reshape(-1)
        edges = np.linspace(0, flat.size, n + 1).astype(np.int64)

        def piece(index):
            index %= n
            return flat[edges[index]:edges[index + 1]]

        following, preceding = (rank + 1) % n, (rank - 1) % n
        for step in range(n - 1):
            incoming = self._exchange({following: piece(rank - step)}, [preceding])[preceding]
            _combine(piece(rank - step - 1), incoming, operation)
        for step in range(n - 1):
            piece(rank - step)[:] = self._exchange({following: piece(rank + 1 - step)},
                                                   [preceding])[preceding]
        return flat.reshape(array.shape)

    def _others(self) -> list:
        return [other for other in range(self.size) if other != self.rank]

    def _exchange(self, outgoing: dict, sources: list) -> dict:
        """Send ``outgoing[r]`` to each rank r while receiving one value from
        each rank of ``sources``; returns them by rank. One loop serves
        whichever socket is ready (non-blocking for the exchange): with every
        rank sending at once, blocking sends of messages larger than the
        sockets' buffers would wait for each other forever."""
        framed = {}   # a value sent to several ranks is framed once
        sending = {}
        for other, value in outgoing.items():
            if id(value) not in framed:
                framed[id(value)] = _framed(value)
            sending[other] = list(framed[id(value)])
            self.bytes_sent += _payload_bytes(sending[other])
            self.messages_sent += 1
        if all(sum(len(part) for part in parts) <= SMALL_MESSAGE_BYTES
               for parts in sending.values()):
            # Small messages fit the sockets' buffers: blocking sends return
            # without the receiver, and the loop's system calls cost more
            # than the exchange (most of a depth's exchanges are this small).
            for other, parts in sending.items():
                self._send_parts(other, parts)
            return {other: self.receive(other) for other in sources}
        receiving = {other: _Incoming() for other in sources}
        received = {}
        # One poll object for the fit (registering is no system call) and
        # sends and receives that do not block (MSG_DONTWAIT): no selector
        # made and closed, no socket switched in and out of blocking mode,
        # per exchange (~50 us of a 250 KB exchange's ~0.36 ms).
        if self._poller is None:
            self._poller = select.poll()   # (POSIX: Linux and macOS)
        poller, rank_of = self._poller, self._rank_of_descriptor
        involved = [self._peers[other] for other in {*sending, *receiving}]
        for other in {*sending, *receiving}:
            poller.register(self._peers[other], _events(other, sending, receiving))
        try:
            while sending or receiving:
                start = time.perf_counter()
                ready = poller.poll()
                self.seconds_waiting += time.perf_counter() - start
                for descriptor, mask in ready:
                    other = rank_of[descriptor]
                    connection = self._peers[other]
                    if mask & select.POLLOUT and other in sending:
                        parts = sending[other]
                        try:
                            count = connection.send(parts[0], socket.MSG_DONTWAIT)
                        except BlockingIOError:
                            count = 0
                        except OSError as error:
                            raise PeerLostError(f"worker of rank {other} is gone "
                                                f"({error})") from None
                        if count == len(parts[0]):
                            parts.pop(0)
                        else:
                            parts[0] = parts[0][count:]
                        if not parts:
                            del sending[other]
                    readable = select.POLLIN | select.POLLHUP | select.POLLERR
                    if mask & readable and other in receiving:
                        incoming = receiving[other]
                        incoming.read_from(connection, other)
                        if incoming.value is not _Incoming.PENDING:
                            received[other] = receiving.pop(other).value
                    elif mask & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
                        raise PeerLostError(f"worker of rank {other} closed its connection "
                                            "(it failed or left the cluster)")
                    events = _events(other, sending, receiving)
                    if events:
                        poller.modify(connection, events)
                    else:
                        poller.unregister(connection)
        finally:
            for connection in involved:   # (left registered only by an error)
                try:
                    poller.unregister(connection)
                except KeyError:
                    pass
        return received


def _events(other: int, sending: dict, receiving: dict) -> int:
    """What an exchange still waits for on the connection to ``other``."""
    return ((select.POLLOUT if other in sending else 0)
            | (select.POLLIN if other in receiving else 0))


class _Incoming:
    """One message being received without blocking: its frame, its
    description, then its payload (into the array it describes, or bytes to
    unpickle); ``value`` once complete."""

    PENDING = object()

    def __init__(self):
        self.stage = "frame"
        self.buffer = memoryview(bytearray(_FRAME.size))
        self.received = 0
        self.kind = self.length = None
        self.array = self.payload = None
        self.value = self.PENDING

    def begin(self, kind: int, description: bytes, length: int) -> None:
        """The payload's place, from the frame and the description."""
        self.kind, self.length = kind, length
        if kind == _ARRAY:
            dtype, shape = _array_description(description)
            self.array = np.empty(shape, dtype=dtype)
            if self.array.nbytes != length:
                raise PeerLostError("a malformed message: its array does not match its length")
            self.payload = memoryview(self.array.reshape(-1).view(np.uint8))
        elif kind == _PICKLED:
            self.payload = memoryview(bytearray(length))
        else:
            raise PeerLostError(f"a malformed message (kind {kind})")

    def finished(self):
        return self.array if self.kind == _ARRAY else pickle.loads(self.payload)

    def read_from(self, connection: socket.socket, other: int) -> None:
        while True:
            view = self.buffer[self.received:]
            count = 0
            if len(view):
                try:
                    count = connection.recv_into(view, len(view), socket.MSG_DONTWAIT)
                except BlockingIOError:
                    return
                except OSError as error:
                    raise PeerLostError(f"worker of rank {other} is gone ({error})") from None
                if count == 0:
                    raise PeerLostError(f"worker of rank {other} closed its connection "
                                        "(it failed or left the cluster)")
            self.received += count
            if self.received < len(self.buffer):
                continue
            self.received = 0
            if self.stage == "frame":
                kind, described, length = _FRAME.unpack(self.buffer)
                self.kind, self.length = kind, length
                self.stage, self.buffer = "description", memoryview(bytearray(described))
            elif self.stage == "description":
                self.begin(self.kind, bytes(self.buffer), self.length)
                self.stage, self.buffer = "payload", self.payload
            else:
                self.value = self.finished()
                return


def _framed(value) -> list:
    """``value`` as the parts of one message (_FRAME): an array of numbers of
    one dimension or more as its description and its own memory (one part
    when small: one system call), anything else pickled."""
    if (isinstance(value, np.ndarray) and value.ndim >= 1
            and value.dtype.kind in "biufc"):
        array = np.ascontiguousarray(value)
        head = _array_head(array.dtype.str, array.shape)
        payload = memoryview(array.reshape(-1).view(np.uint8))
        if array.nbytes <= SMALL_MESSAGE_BYTES:
            return [memoryview(head + payload.tobytes())]
        return [memoryview(head), payload]
    payload = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    return [memoryview(_FRAME.pack(_PICKLED, 0, len(payload)) + payload)]


# A depth sends arrays of a few shapes many times: their frames and
# descriptions are made and read once (bounded: a fit's shapes are few).
@functools.lru_cache(maxsize=1024)
def _array_head(dtype: str, shape: tuple) -> bytes:
    """The frame and description of an array of ``dtype`` and ``shape``."""
    description = pickle.dumps((dtype, shape), protocol=pickle.HIGHEST_PROTOCOL)
    size = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    return _FRAME.pack(_ARRAY, len(description), size) + description


@functools.lru_cache(maxsize=1024)
def _array_description(description: bytes) -> tuple:
    """(dtype, shape) from an array's description (_array_head's)."""
    dtype, shape = pickle.loads(description)
    return np.dtype(dtype), shape


def _check_alike(array: np.ndarray, parts: list) -> None:
    """The direct allreduce's check: every rank gave an array of ``array``'s
    dtype and shape."""
    if any(not isinstance(part, np.ndarray) or part.dtype != array.dtype
           or part.shape != array.shape for part in parts):
        raise ValueError("allreduce: the ranks gave arrays of different dtypes or shapes")


def _payload_bytes(parts: list) -> int:
    """Bytes of a framed message after its frame (what bytes_sent counts)."""
    return sum(len(part) for part in parts) - _FRAME.size


def _combine_into(out: np.ndarray, first: np.ndarray, second: np.ndarray,
                  operation: str) -> None:
    """``out = first + second`` or their maximum (``out`` may be either)."""
    if operation == "sum":
        np.add(first, second, out=out)
    else:
        np.maximum(first, second, out=out)


def _combine(total: np.ndarray, part: np.ndarray, operation: str) -> None:
    _combine_into(total, total, part, operation)


def _receive_exactly(connection: socket.socket, size: int, other=None, into=None) -> bytes:
    """``size`` bytes from ``connection``: into the writable buffer ``into``
    when given (returned as it is), else as new bytes."""
    view = memoryview(bytearray(size)) if into is None else into
    received = 0
    while received < size:
        try:
            count = connection.recv_into(view[received:], size - received)
        except OSError as error:
            raise PeerLostError(f"worker of rank {other} is gone ({error})") from None
        if count == 0:
            raise PeerLostError(f"worker of rank {other} closed its connection "
                                "(it failed or left the cluster)")
        received += count
    return view.tobytes() if into is None else into
