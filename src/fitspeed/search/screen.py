"""The screen: each knob's most promising value once, against the baseline measured again every few.

It only ranks the changes (`Tuner` runs it first): a change that fails, or
comes in at CLEARLY_SLOWER of the baseline or less, is dropped there. A screen
trial selects; it is never evidence in a decision.
"""

from __future__ import annotations

from fitspeed.core.config import TrialConfig
from fitspeed.core.record import TrialRecord
from fitspeed.core.sequential import Step, Verdict
from fitspeed.search.budget import SCREEN_GROUP
from fitspeed.search.decider import STOP_SHARE
from fitspeed.search.phase import Phase
from fitspeed.search.searcher import Searcher
from fitspeed.search.space import Dimension
from fitspeed.search.workers import Busy

CLEARLY_SLOWER = 0.7  # a screen trial at this ratio or below drops its change


class Screen:
    """The screen of one tuner's search."""

    def __init__(self, tuner: Searcher) -> None:
        self.tuner = tuner

    def run(self, sweep: list[Dimension]) -> list[tuple[TrialConfig, float]]:
        """Each knob's most promising value once, the baseline again after every SCREEN_GROUP of them.

        A knob's next value is screened only when the one before it failed or
        came in at CLEARLY_SLOWER or less (`--space` lists them most promising
        first), except where the values are alternatives (`Dimension.each`:
        both mixed precisions, since a CPU may run either one fast). Returns the single changes worth combining, most promising
        first, with their ratio to the median baseline figure; those that came
        in at CLEARLY_SLOWER or less are decided there ("slower", one pair).
        Knobs measured only for their cost wait until after the combination.
        """
        queue = [(dim, 0, False) for dim in sweep if not dim.cost_only]
        measured: list[tuple[TrialConfig, float | None]] = []
        number = 0
        while queue:
            dim, index, deferred = queue.pop(0)
            config = self.tuner._config(knob_values=dim.change(dim.values[index]))
            if config is None:
                record: TrialRecord | Busy | None = None
            else:
                if not deferred:
                    if number and number % SCREEN_GROUP == 0 \
                            and self.tuner.measure_or_busy(self.tuner.base, Phase.BASELINE, f"#screen{number}") is None:
                        break
                    number += 1
                reference = self.tuner.ledger.screen_reference()
                below = reference and STOP_SHARE * reference
                record = (self.tuner.measure(config, Phase.SWEEP, stop_below=below) if deferred
                          else self.tuner.measure_or_busy(config, Phase.SWEEP, stop_below=below))
                if isinstance(record, Busy):  # another worker measures it: come back to it at the end
                    queue.append((dim, index, True))
                    continue
                if record is None:
                    break
                measured.append((config, record.throughput))
            speed = record.throughput if isinstance(record, TrialRecord) else None
            reference = self.tuner.ledger.screen_reference()
            if index + 1 < len(dim.values) and (dim.each or speed is None
                                                or (reference and speed <= CLEARLY_SLOWER * reference)):
                queue.append((dim, index + 1, False))
        if measured:  # close the last group with the baseline
            self.tuner.measure(self.tuner.base, Phase.BASELINE, f"#screen{number}")
        self.tuner._settle((Phase.BASELINE, Phase.SWEEP))  # every worker ranks the same screen
        reference = self.tuner.ledger.screen_reference()
        promising = []
        for config, speed in measured:
            if speed is None or reference is None:
                continue  # a failure is shown as such in the table; it is not combined
            ratio = speed / reference
            if ratio <= CLEARLY_SLOWER:
                self.tuner.decider.store(Phase.SCREEN, self.tuner.base, config, [(reference, speed)],
                                   Step(Verdict.SLOWER, 1, ratio, None, None, 0.0), None)
                continue
            promising.append((config, ratio))
        return sorted(promising, key=lambda item: item[1], reverse=True)

    def costs(self, sweep: list[Dimension]) -> None:
        """Knobs measured alone for their cost (deterministic), never recommended for speed."""
        for dim in sweep:
            if dim.cost_only and dim.values:
                config = self.tuner._config(knob_values=dim.change(dim.values[0]))
                if config is None or self.tuner.measure(config, Phase.SWEEP) is None:
                    return
