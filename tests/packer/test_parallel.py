"""ordered_map, the packer's worker pool: input order kept, and the source read only a bounded way ahead."""

from __future__ import annotations

import pytest

from packer.load import load_batch
from packer.sample import MemberPlan, SamplePlan
from shardstream.parallel import ordered_map


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    root = tmp_path_factory.mktemp("files")
    paths = []
    for i in range(400):
        path = root / f"{i:04d}.txt"
        path.write_bytes(f"payload {i}".encode())
        paths.append(str(path))
    return paths


@pytest.mark.parametrize(("workers", "in_flight"), [(1, 4), (2, 4), (3, 2)])
def test_source_is_consumed_at_most_the_in_flight_bound_ahead_of_the_writer(files, workers, in_flight):
    chunk = 16
    consumed = 0

    def plans():  # the source, counting how far it has been read
        nonlocal consumed
        for i, path in enumerate(files):
            consumed += 1
            yield SamplePlan(key=f"{i:04d}", source=path, members=(MemberPlan(ext="txt", path=path),))

    ahead = []
    results = ordered_map(
        load_batch, plans(), workers=workers, chunk=chunk, in_flight_per_worker=in_flight, args=(None,)
    )
    for n, sample in enumerate(results, 1):
        ahead.append(consumed - n)  # read from the source but not yet handed to the writer
        assert sample.key == f"{n - 1:04d}" and sample.members == (("txt", f"payload {n - 1}".encode()),)
    assert n == len(files)
    if workers == 1:
        assert max(ahead) == chunk - 1  # one chunk at a time, in this process
    else:
        bound = workers * in_flight * chunk
        assert max(ahead) == bound - 1, "in-flight chunks must fill up to the bound, and never beyond"


def _pids(batch: list[int]) -> list[tuple[int, int]]:
    import os

    return [(item, os.getpid()) for item in batch]


def test_inline_chunks_run_here_and_keep_their_place_among_pool_chunks():
    import os

    items = list(range(200))
    inline_chunk = lambda batch: batch[0] // 10 % 3 == 0  # noqa: E731  (chunks 0, 30, 60, 90, ...)
    results = list(ordered_map(_pids, items, workers=2, chunk=10, inline=inline_chunk))
    assert [item for item, _ in results] == items
    here = {item for item, pid in results if pid == os.getpid()}
    assert here == {i for i in items if i // 10 % 3 == 0}
