"""The screen: each knob's most promising value once, in rounds with the baseline (lockstep where they fit).

It only ranks the changes (`Tuner` runs it first): a change that fails, or
comes in at CLEARLY_SLOWER of the baseline or less, is dropped there. A screen
trial selects; it is never evidence in a decision.
"""

from __future__ import annotations

import random

from fitspeed.core.config import TrialConfig
from fitspeed.core.record import TrialRecord
from fitspeed.core.sequential import Step, Verdict
from fitspeed.search.budget import SCREEN_GROUP
from fitspeed.search.decider import STOP_SHARE, Ask
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
        """Each knob's most promising value once, in rounds of the baseline and SCREEN_GROUP candidates.

        Each round is one `Tuner.measure_round` (in lockstep, the baseline and
        its candidates timed in turns in the same seconds), and a candidate's
        ratio is to its own round's baseline (to the median of the screen's
        baselines where that one failed). A knob's next value is screened, in a
        later round, only when the one before it failed or came in at
        CLEARLY_SLOWER or less (`--space` lists them most promising first),
        except where the values are alternatives (`Dimension.each`: both mixed
        precisions, since a CPU may run either one fast). Returns the single
        changes worth combining, most promising first, with their ratio; those
        that came in at CLEARLY_SLOWER or less are decided there ("slower",
        one pair). Knobs measured only for their cost wait until after the
        combination.
        """
        tuner = self.tuner
        queue = [(dim, 0) for dim in sweep if not dim.cost_only]
        measured: list[tuple[TrialConfig, float | None, float | None]] = []  # a candidate, its figure, its baseline's
        later: list[tuple[list[tuple[Dimension, int, TrialConfig]], list[Ask], int]] = []  # rounds another worker ran
        number = 0
        while queue or later:
            if not queue:  # what is left: the rounds another worker was measuring, waited for now
                group, asks, first = later.pop(0)
                records: list[TrialRecord | Busy | None] = list(tuner.measure_round(asks, first=first))
            else:
                left = tuner.ledger.left()
                # the round's own baseline where the budget has room for it beside the round's candidates; else the
                # candidates alone, each against the screen's baselines so far (a budget that pays for little more)
                pending = sum(len(dim.values) - index if dim.each else 1 for dim, index in queue)
                with_base = left >= min(pending, SCREEN_GROUP) + 1
                room = left - 1 if with_base else left
                group = []
                while queue and len(group) < min(SCREEN_GROUP, room):
                    dim, index = queue.pop(0)
                    if dim.each and index + 1 < len(dim.values):  # alternatives: the next one may share this round
                        queue.insert(0, (dim, index + 1))
                    config = tuner.config_of(knob_values=dim.change(dim.values[index]))
                    if config is None:
                        self._follow(queue, dim, index, None, None)
                    else:
                        group.append((dim, index, config))
                if not group:
                    if later:
                        continue
                    break
                reference = tuner.ledger.screen_reference()
                below = reference and STOP_SHARE * reference
                asks = [*([Ask(tuner.base, Phase.BASELINE, f"#screen{number}")] if with_base else []),
                        *(Ask(config, Phase.SWEEP, "", below or None) for _, _, config in group)]
                first = random.Random(f"{tuner.settings.seed}/screen/{number}").randrange(len(asks))
                number += len(group)
                records = tuner.measure_round_or_busy(asks, first=first)
                if any(isinstance(record, Busy) for record in records):  # another worker measures it: come back
                    later.append((group, asks, first))
                    continue
            if any(record is None for record in records):
                break  # the budget ran out
            with_base = asks[0].phase == Phase.BASELINE
            base = records[0].throughput if with_base and isinstance(records[0], TrialRecord) else None
            for (dim, index, config), record in zip(group, records[1:] if with_base else records):
                speed = record.throughput if isinstance(record, TrialRecord) else None
                measured.append((config, speed, base))
                self._follow(queue, dim, index, speed, base or tuner.ledger.screen_reference())
        tuner.settle((Phase.BASELINE, Phase.SWEEP))  # every worker ranks the same screen
        reference = tuner.ledger.screen_reference()
        promising = []
        for config, speed, base in measured:
            against = base or reference
            if speed is None or against is None:
                continue  # a failure is shown as such in the table; it is not combined
            ratio = speed / against
            if ratio <= CLEARLY_SLOWER:
                tuner.decider.store(Phase.SCREEN, tuner.base, config, [(against, speed)],
                                    Step(Verdict.SLOWER, 1, ratio, None, None, 0.0), None)
                continue
            promising.append((config, ratio))
        return sorted(promising, key=lambda item: item[1], reverse=True)

    @staticmethod
    def _follow(queue: list[tuple[Dimension, int]], dim: Dimension, index: int, speed: float | None,
                reference: float | None) -> None:
        """Queue `dim`'s next value where this one failed or was clearly slower (a knob whose values are
        alternatives has each of them queued as it goes, `run`)."""
        if index + 1 < len(dim.values) and not dim.each and (speed is None
                                                             or (reference and speed <= CLEARLY_SLOWER * reference)):
            queue.append((dim, index + 1))

    def costs(self, sweep: list[Dimension]) -> None:
        """Knobs measured alone for their cost (deterministic), never recommended for speed."""
        for dim in sweep:
            if dim.cost_only and dim.values:
                config = self.tuner.config_of(knob_values=dim.change(dim.values[0]))
                if config is None or self.tuner.measure(config, Phase.SWEEP) is None:
                    return
