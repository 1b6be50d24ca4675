"""`tune --batch-sizes`: throughput against batch size, up to the first size that runs out of memory."""

from __future__ import annotations

from fitspeed.search.searcher import Searcher
from fitspeed.search.settings import next_batch_probe


class BatchSizes:
    """The batch-size sweep of one tuner's search (outside the --trials budget)."""

    def __init__(self, tuner: Searcher) -> None:
        self.tuner = tuner

    def run(self) -> None:
        """Throughput against batch size, up to the first that runs out of memory.

        Asked for explicitly, so outside the --trials budget. After an
        out-of-memory, sizes between the last that fit and the first that did
        not are bisected (multiples of 8) to find the largest that fits.
        """
        fits: list[int] = []
        for size in sorted(self.tuner.settings.batch_sizes):
            status = self._status(size)
            if status == "oom":
                low, high = max(fits, default=0), size
                while True:
                    middle = next_batch_probe(low, high)
                    if middle is None:
                        break
                    if self._status(middle) == "oom":
                        high = middle
                    else:
                        low = middle
                break  # larger batches will not fit either
            if status == "ok":
                fits.append(size)

    def _status(self, size: int) -> str | None:
        config = self.tuner._config(knob_values={"batch_size": size})
        record = self.tuner.measure(config, "batch_size", budgeted=False) if config else None
        return record["status"] if record else None
