"""`tune --batch-sizes`: throughput against batch size, up to the first size that runs out of memory.

A size that runs out of memory is measured again with rematerialization
(`remat=full`, `fitspeed.trial.remat`): if it fits so, the sweep goes on to
larger sizes with remat on, and stops at the first size that runs out of
memory even with it. Each size's record says whether it ran with remat.
"""

from __future__ import annotations

from fitspeed.core.record import Status
from fitspeed.search.phase import Phase
from fitspeed.search.searcher import Searcher
from fitspeed.search.settings import next_batch_probe

REMAT = "full"  # the RematScope mode tried on a size that ran out of memory


class BatchSizes:
    """The batch-size sweep of one tuner's search (outside the --trials budget)."""

    def __init__(self, tuner: Searcher) -> None:
        self.tuner = tuner
        # remat is tried unless the baseline has it on already, or a try of it could not run
        # (a backend that cannot do it: the tuner notes why, once)
        self.can_remat = tuner.base.remat == "off"

    def run(self) -> None:
        """Throughput against batch size, up to the first that runs out of memory even with remat.

        Asked for explicitly, so outside the --trials budget. After an
        out-of-memory, sizes between the last that fit and the first that did
        not are bisected (multiples of 8) to find the largest that fits, each
        with remat only if it ran out of memory without.
        """
        fits: list[int] = []
        remat = self.tuner.base.remat
        for size in sorted(self.tuner.settings.batch_sizes):
            status, mode = self._fits(size, remat)
            if status == Status.OOM:
                low, high = max(fits, default=0), size
                while True:
                    middle = next_batch_probe(low, high)
                    if middle is None:
                        break
                    status, mode = self._fits(middle, remat)
                    if status == Status.OOM:
                        high = middle
                    else:
                        low = middle
                        remat = mode if status == Status.OK else remat
                break  # larger batches will not fit either
            if status == Status.OK:
                fits.append(size)
                remat = mode  # a size that needed remat: the larger ones run with it from the start

    def _fits(self, size: int, remat: str) -> tuple[Status | None, str]:
        """The status at `size` and the remat mode it ran with: again with remat after an out-of-memory."""
        status = self._status(size, remat)
        if status != Status.OOM or remat != "off" or not self.can_remat:
            return status, remat
        retried = self._status(size, REMAT)
        if retried in (Status.OK, Status.OOM):
            return retried, REMAT
        self.can_remat = False  # remat could not run here (the backend, the model): not tried again
        return status, remat

    def _status(self, size: int, remat: str) -> Status | None:
        values = {"batch_size": size} if remat == self.tuner.base.remat else {"batch_size": size, "remat": remat}
        config = self.tuner.config_of(knob_values=values)
        record = self.tuner.measure(config, Phase.BATCH_SIZE, budgeted=False) if config else None
        return record.status if record else None
