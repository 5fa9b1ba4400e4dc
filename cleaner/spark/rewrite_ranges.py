"""How a log's groups are cut into the consecutive ranges of its rewrite tasks, and what each group costs.

Before anything is mapped, the driver cuts by bytes (``job_plan.ranges_per_log`` decides how many), to
decide whether cutting a log shortens its longest task enough. A log mapped by key hash is then cleaned
by tasks that take its groups one at a time (``group_claims``), the costliest first by ``rewrite_costs``,
which the classes' superseded bitmaps tell. A group's rewrite reads all of its bytes, and re-encodes and
writes the records it keeps; in a log whose keys are updated all along, the first groups keep almost
nothing and the last ones most, so equal bytes are far from equal work.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Sequence

__all__ = ["KEPT_COST", "balanced_ranges", "rewrite_costs"]

# A group's rewrite costs its bytes, and this much more per byte for the share of its records it keeps (the
# survivors re-encoded and written). Fitted on this project's benchmark (groups of a 1.1 GiB log, 1M keys;
# a batch the bitmap marks wholly superseded is dropped unparsed): 127 MiB keeping ~0% of its records
# 15-20 ms; 10% 38 ms in-process, 69 ms in a Spark task; 31% 52 and 157 ms; 70 MiB keeping 74% 84 and
# 148 ms. That is 5-9 in-process and 23-37 in Spark tasks, whose new pages cost more on this project's VM
# (the first touch of memory not used recently); every value from 8 to 20 cuts that log the same way.
# Earlier fits: 8 (the upper bound's batch made its task put every deferred entry), then 3 (before the
# dropped batches went unparsed, when the pages written were warm). It now only orders the groups the
# tasks take (``group_claims``): a poor fit costs at most about one group's time at the end.
KEPT_COST = 10.0


def rewrite_costs(
    bases: Sequence[int], ends: Sequence[int], sizes: Sequence[int], superseded: Iterable[tuple[int, int]]
) -> list[float]:
    """Each group's cost: ``bases``/``ends`` its offsets [base, end), ``sizes`` its bytes; ``superseded``
    the (first offset, count) buckets of the key classes' bitmaps (``partial_maps.superseded_counts``),
    each counted in the group it starts in. The share of a group's offsets not superseded stands for the
    share of its records it keeps (offsets below the map's, in already cleaned segments, all count kept)."""
    gone = [0] * len(bases)
    for start, count in superseded:
        at = bisect.bisect_right(bases, start) - 1
        if at >= 0:
            gone[at] += count
    return [
        size * (1 + KEPT_COST * max(0.0, 1 - dropped / max(end - base, 1)))
        for size, dropped, base, end in zip(sizes, gone, bases, ends, strict=True)
    ]


def balanced_ranges(weights: Sequence[float], slots: Sequence[int], count: int) -> list[tuple[int, ...]]:
    """``slots`` (one a group, ``weights`` theirs) cut into ``count`` consecutive ranges of about equal
    weight (fewer if there are fewer groups): range k ends at the group whose end lies nearest to k/count
    of the total."""
    ends = list(itertools.accumulate(weights))
    cuts = {0, len(slots)}
    for k in range(1, count):
        target = ends[-1] * k / count
        at = bisect.bisect_left(ends, target)
        if at > 0 and target - ends[at - 1] <= ends[min(at, len(ends) - 1)] - target:
            at -= 1
        cuts.add(min(at + 1, len(slots)))
    bounds = sorted(cuts)
    return [tuple(slots[lo:hi]) for lo, hi in itertools.pairwise(bounds) if hi > lo]
