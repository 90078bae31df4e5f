"""The distributed fit's collective (packboost._collective) and the shard view
of the driver (packboost._row_shard): ranks as threads over real sockets."""

import threading

import numpy as np
import pytest

from packboost import _collective, _histogram
from packboost._fixed_point import grid_bounds_of_rows, largest_and_total, to_fixed_point
from packboost._row_shard import RowShard
from packboost._samples import TreeSamples


def run_ranks(n_ranks, function, local=True, addresses_seen=None):
    """``function(collective)`` on ``n_ranks`` connected ranks (threads);
    their results in rank order, or the first error raised. ``local``: may
    the ranks connect through Unix sockets (one per rank: a list);
    ``addresses_seen(addresses)``: the addresses the ranks dial, changed."""
    local = local if isinstance(local, list) else [local] * n_ranks
    listeners = [_collective.listen("127.0.0.1", local=local[rank]) for rank in range(n_ranks)]
    addresses = [_collective.address_of(listener) for listener in listeners]
    if addresses_seen is not None:
        addresses = addresses_seen(addresses)
    results, errors = [None] * n_ranks, []

    def rank_main(rank):
        collective = _collective.Collective.connect(rank, addresses, listeners[rank])
        try:
            results[rank] = function(collective)
        except BaseException as error:  # noqa: BLE001 -- reported below
            errors.append(error)
        finally:
            collective.close()

    threads = [threading.Thread(target=rank_main, args=(rank,)) for rank in range(n_ranks)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    for listener in listeners:
        listener.close()
    assert not any(thread.is_alive() for thread in threads), "a rank hangs"
    if errors:
        raise errors[0]
    return results


@pytest.mark.parametrize("n_ranks", [2, 3, 4, 5])
@pytest.mark.parametrize("n_values", [1, 4, 37])
def test_ring_direct_and_star_reduce_alike(monkeypatch, n_ranks, n_values):
    """Arrays large enough for the ring (here: any), small arrays sent to
    every rank (direct) and through rank 0 (the star, beyond DIRECT_MAX_RANKS)
    give every rank the same sums and maxima, for any size (fewer values than
    ranks: empty pieces) and shape; each rank of the ring sends about
    2 (n - 1) / n of the array, of the direct exchange n - 1 arrays."""
    rng = np.random.default_rng(n_ranks * 100 + n_values)
    counts = rng.integers(-2**40, 2**40, size=(n_ranks, n_values, 3))
    floats = rng.normal(size=(n_ranks, 2, n_values))
    floats[1, 0, 0] = np.nan

    def work(collective, ring_bytes, direct_ranks):
        monkeypatch.setattr(_collective, "RING_MIN_BYTES", ring_bytes)
        monkeypatch.setattr(_collective, "DIRECT_MAX_RANKS", direct_ranks)
        rank = collective.rank
        sums = collective.allreduce(counts[rank], "sum")
        maxima = collective.allreduce(floats[rank], "max")
        # float sums in rank order on every rank: the same bits everywhere
        float_sums = collective.allreduce(floats[rank], "sum")
        return sums, maxima, float_sums, collective.bytes_sent

    ring = run_ranks(n_ranks, lambda collective: work(collective, 0, 16))
    direct = run_ranks(n_ranks, lambda collective: work(collective, 1 << 60, 16))
    star = run_ranks(n_ranks, lambda collective: work(collective, 1 << 60, 1))
    for results in (ring, direct, star):
        for sums, maxima, float_sums, _ in results:
            np.testing.assert_allclose(float_sums, floats.sum(axis=0), rtol=1e-12)
            np.testing.assert_array_equal(sums, counts.sum(axis=0))
            np.testing.assert_array_equal(maxima, np.maximum.reduce(floats, axis=0))
            assert sums.shape == (n_values, 3) and maxima.shape == (2, n_values)
    for direct_result, star_result in zip(direct, star, strict=True):
        np.testing.assert_array_equal(direct_result[2], star_result[2])
        np.testing.assert_array_equal(direct_result[2], direct[0][2])
    if n_values == 37 and n_ranks > 2:
        # rank 0 of the star and every rank of the direct exchange send n - 1
        # whole arrays, every rank of the ring less
        assert max(item[3] for item in ring) < min(star[0][3], direct[0][3])


@pytest.mark.parametrize("local", [True, False])
@pytest.mark.parametrize("n_ranks", [2, 3])
def test_messages_larger_than_the_socket_buffers_do_not_wait_for_each_other(n_ranks, local):
    """Every rank sends 16 MB to every other at once (the direct exchange of
    a large array): each sends while it receives, none waits forever; over
    Unix sockets and over TCP."""
    def work(collective):
        values = np.full(2 << 20, collective.rank + 1, dtype=np.int64)
        gathered = collective.allgather(values)
        return [int(part[0]) for part in gathered], int(collective.allreduce(values)[-1])

    for gathered, total in run_ranks(n_ranks, work, local=local):
        assert gathered == list(range(1, n_ranks + 1))
        assert total == sum(range(1, n_ranks + 1))


def test_a_rank_lost_in_the_ring_is_a_lost_peer(monkeypatch):
    monkeypatch.setattr(_collective, "RING_MIN_BYTES", 0)

    def work(collective):
        if collective.rank == 2:
            raise RuntimeError("rank 2 fails")
        collective.allreduce(np.zeros(1000), "sum")

    with pytest.raises((RuntimeError, _collective.PeerLostError)):
        run_ranks(3, work)


def _families(collective):
    return sorted(connection.family.name for connection in collective._peers.values())


@pytest.mark.skipif(not _collective.LOCAL_SOCKETS, reason="Unix sockets in the abstract "
                    "namespace are Linux's")
def test_ranks_of_one_machine_connect_through_unix_sockets_others_by_tcp():
    """Ranks of one machine take the Unix socket; a rank listening on TCP
    only, or one whose Unix socket cannot be reached (another machine's
    name, another network namespace), is reached by TCP; the exchanges are
    the same either way."""
    def work(collective):
        return _families(collective), collective.allreduce(np.array([collective.rank]), "sum")

    same = run_ranks(3, work)
    assert [families for families, _ in same] == [["AF_UNIX", "AF_UNIX"]] * 3
    assert all(total[0] == 3 for _, total in same)

    # Rank 0 listens on TCP only: ranks 1 and 2 dial it by TCP (a rank dials
    # the lower ranks), rank 2 dials rank 1 by Unix.
    mixed = run_ranks(3, work, local=[False, True, True])
    assert [families for families, _ in mixed] == [
        ["AF_INET", "AF_INET"], ["AF_INET", "AF_UNIX"], ["AF_INET", "AF_UNIX"]]

    def unreachable(addresses):
        # rank 0's name unknown here (as from another namespace), rank 1 on
        # "another machine": both are dialled by TCP
        host, port, machine, _ = addresses[0]
        first = (host, port, machine, "\0packboost-nobody-listens-here")
        host, port, _, name = addresses[1]
        return [first, (host, port, "another machine", name), *addresses[2:]]

    fallback = run_ranks(3, work, addresses_seen=unreachable)
    assert [families for families, _ in fallback] == [["AF_INET", "AF_INET"]] * 3
    assert all(total[0] == 3 for _, total in fallback)


@pytest.mark.parametrize("n_ranks", [1, 2, 3])
def test_allreduce_allgather_broadcast(n_ranks):
    def work(collective):
        rank = collective.rank
        values = np.array([rank + 1.0, -rank, np.nan if rank == 1 else 0.0])
        return dict(sum=collective.allreduce(np.array([rank + 1.0, 2.0 ** -rank]), "sum"),
                    max=collective.allreduce(values, "max"),
                    gathered=collective.allgather(("rank", rank)),
                    broadcast=collective.broadcast(rank * 10, root=n_ranks - 1))

    for result in run_ranks(n_ranks, work):
        expected = np.array([sum(range(1, n_ranks + 1)), sum(2.0 ** -r for r in range(n_ranks))])
        np.testing.assert_array_equal(result["sum"], expected)
        assert result["max"][0] == n_ranks
        assert np.isnan(result["max"][2]) == (n_ranks > 1)   # NaN wins
        assert result["gathered"] == [("rank", r) for r in range(n_ranks)]
        assert result["broadcast"] == (n_ranks - 1) * 10


def test_a_failing_rank_is_a_lost_peer_for_the_others():
    def work(collective):
        if collective.rank == 1:
            raise RuntimeError("rank 1 fails")
        return collective.allreduce(np.zeros(3), "sum")

    with pytest.raises((RuntimeError, _collective.PeerLostError)) as error:
        run_ranks(3, work)
    # Whichever rank reports first, nobody waits forever (run_ranks checks).
    assert "rank 1 fails" in str(error.value) or "rank" in str(error.value)


def test_era_magnitude_sums_and_their_bounds_against_a_row_loop():
    rng = np.random.default_rng(0)
    for sizes in ([1], [0, 3, 0], [5, 1, 7, 0, 2], [1000, 13]):
        values = rng.normal(size=sum(sizes)) * 10.0 ** rng.integers(-3, 3, size=sum(sizes))
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        per_era = _histogram.era_magnitude_sums(values, offsets)
        # the oracle: each era's rows added one by one, the eras in order
        largest = total = 0.0
        for era in range(len(sizes)):
            era_sum = 0.0
            for value in values[offsets[era]:offsets[era + 1]].tolist():
                era_sum += abs(value)
            assert per_era[era] == era_sum
            largest, total = max(largest, era_sum), total + era_sum
        assert largest_and_total(per_era) == (largest, total)


class _Gathered:
    """A collective of one rank that answers as if ``shards`` were the others."""

    def __init__(self, everyone, rank):
        self.everyone, self.rank = everyone, rank

    def allgather(self, value):
        return [value if rank == self.rank else other
                for rank, other in enumerate(self.everyone)]


def _rows_of(offsets, eras):
    """The era-sorted rows of ``eras`` (ascending), era after era."""
    return np.concatenate([np.arange(offsets[era], offsets[era + 1]) for era in eras])


def _shard_bounds(gradients, hessians, offsets, shard_eras):
    """Each shard's grid_bounds_of_rows, the shards holding ``shard_eras``."""
    pieces = []
    for eras in shard_eras:
        rows = _rows_of(offsets, eras)
        sizes = np.diff(offsets)[eras]
        pieces.append(grid_bounds_of_rows(gradients[rows], hessians[rows],
                                          np.concatenate([[0], np.cumsum(sizes)])))
    return pieces


@pytest.mark.parametrize("constant_hessian", [True, False])
def test_shards_round_to_the_grid_of_all_rows(constant_hessian):
    rng = np.random.default_rng(1)
    sizes = np.array([3, 1, 40, 7, 1, 25])
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    gradients = rng.normal(size=offsets[-1]) * 1e3
    hessians = (np.full(offsets[-1], 2.0) if constant_hessian
                else rng.uniform(0.5, 2.0, offsets[-1]))
    whole = to_fixed_point(gradients, hessians, offsets)
    # contiguous ranges, and eras interleaved over the shards in no order
    for shard_eras in ([[0, 1], [2], [3, 4, 5]], [[1, 4], [0, 2, 5], [3]]):
        pieces = _shard_bounds(gradients, hessians, offsets, shard_eras)
        for rank, eras in enumerate(shard_eras):
            shard = RowShard(_Gathered(pieces, rank), offsets, shard_eras, rank, n_features=1)
            rows = _rows_of(offsets, eras)
            part = to_fixed_point(gradients[rows], hessians[rows], shard.local_era_offsets,
                                  shard=shard)
            _assert_same_grid(part, whole, rows)


def _assert_same_grid(part, whole, rows):
    assert (part.gradient_scale, part.hessian_scale, part.count_bits) == \
        (whole.gradient_scale, whole.hessian_scale, whole.count_bits)
    assert part.hessian_is_constant == whole.hessian_is_constant
    np.testing.assert_array_equal(part.packed, whole.packed[rows])
    np.testing.assert_array_equal(part.gradients, whole.gradients[rows])
    np.testing.assert_array_equal(part.hessians, whole.hessians[rows])


def test_local_samples_are_the_shard_rows_of_the_global_draw():
    rng = np.random.default_rng(2)
    sizes = np.array([4, 0, 6, 1, 9, 3])
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    era_keep = (rng.random((3, len(sizes))) < 0.6).astype(np.uint8)
    row_keep = [None]
    for tree in (1, 2):
        kept_rows = int(sizes[era_keep[tree] != 0].sum())
        row_keep.append(rng.random(kept_rows) < 0.5)
    samples = TreeSamples(era_keep, row_keep, offsets)
    for eras in [[0, 1], [2, 3], [4, 5], list(range(6)), [3], [0, 2, 5], [1, 3, 4], [5]]:
        shard = RowShard(None, offsets, [eras], 0, n_features=1)
        local = shard.local_samples(samples)
        # each global row's place in the shard (-1: another shard's)
        place = np.full(offsets[-1], -1)
        place[_rows_of(offsets, eras)] = np.arange(shard.n_rows)
        for tree in range(3):
            rows = samples[tree]
            inside = place[rows][place[rows] >= 0]
            np.testing.assert_array_equal(local[tree], inside)
        np.testing.assert_array_equal(local.era_keep, era_keep[:, eras])


def test_per_era_parts_are_put_in_era_order():
    shard = RowShard(None, np.arange(6), [[1, 4], [0, 2], [3]], 0, n_features=1)
    parts = [np.array([[10, 40]]), np.array([[0, 20]]), np.array([[30]])]
    np.testing.assert_array_equal(shard.in_era_order(parts, axis=1), [[0, 10, 20, 30, 40]])


def test_a_shard_refuses_eras_out_of_order():
    with pytest.raises(ValueError, match="ascending"):
        RowShard(None, np.arange(6), [[2, 1]], 0, n_features=1)


@pytest.mark.parametrize("n_ranks", [2, 3])
def test_values_arrive_as_they_were_sent(n_ranks):
    """Arrays travel as their dtype, shape and memory (_framed), anything else
    pickled: every dtype and byte order, empty and 0-d arrays, a Fortran-order
    and a strided array, messages below, at and above SMALL_MESSAGE_BYTES
    (received in one call after the frame, or into the array), through the
    exchange (allgather) and point to point (broadcast); every array
    received is writable (the allreduce adds into it)."""
    big = np.arange(3 * _collective.SMALL_MESSAGE_BYTES // 8 + 5, dtype=np.int64)
    edge = _collective.SMALL_MESSAGE_BYTES // 8
    values = [np.arange(7, dtype=np.float64), np.array([True, False]),
              np.array([1 + 2j, 3j]), np.arange(6, dtype=">i4").reshape(2, 3),
              np.asfortranarray(np.arange(12.0).reshape(3, 4)), np.arange(10)[::3],
              np.zeros((0, 4), dtype=np.uint8), np.array(5.5), big, big.astype(np.float32),
              big[:edge], big[:edge + 1], {"a": [1, 2]}, None, "text"]

    def check(collective):
        for value in values:
            for received in (collective.allgather(value),
                             [collective.broadcast(value, root=0)]):
                for got in received:
                    if isinstance(value, np.ndarray):
                        assert type(got) is np.ndarray and got.dtype == value.dtype
                        assert got is value or got.flags.writeable
                        np.testing.assert_array_equal(got, value)
                        assert got.shape == value.shape
                    else:
                        assert got == value
        return True

    assert all(run_ranks(n_ranks, check))


@pytest.mark.parametrize("n_values", [3, 3 * _collective.SMALL_MESSAGE_BYTES // 8])
def test_allreduce_leaves_the_callers_array_alone(n_values):
    """The direct allreduce adds into a received array, never into the one
    the caller gave (which the caller may read again); every rank gets
    the same sums and maxima, floats included."""
    def reduce(collective):
        own = np.linspace(0.1, 1.0, n_values) * (collective.rank + 1) / 3
        before = own.copy()
        summed = collective.allreduce(own, "sum")
        largest = collective.allreduce(own, "max")
        np.testing.assert_array_equal(own, before)
        assert summed is not own and largest is not own
        return summed, largest

    results = run_ranks(2, reduce)
    base = np.linspace(0.1, 1.0, n_values)
    for summed, largest in results:
        np.testing.assert_array_equal(summed, base * 1 / 3 + base * 2 / 3)
        np.testing.assert_array_equal(largest, base * 2 / 3)
    np.testing.assert_array_equal(results[0][0], results[1][0])


def test_allreduce_refuses_arrays_that_differ_between_ranks():
    def reduce(collective):
        return collective.allreduce(np.zeros(3 + collective.rank))

    with pytest.raises(ValueError, match="different dtypes or shapes"):
        run_ranks(2, reduce)
