"""The study's ledger: every key the search stores, the budget, and the chain of incumbents.

A tuning study is an Optuna study. Its trials hold the measurements (each
trial's user attrs `phase`, `config_key`, `config` and `record`); its study
user attrs hold what the search concluded, under the keys defined here and
nowhere else:

| key | what it holds |
|---|---|
| `decision:ID` | one paired decision: its pairs and their order, estimate, interval, design, noise, verdict |
| `budget` | what `--trials` buys on this space (`tuner.budget_plan`) |
| `factorial:ID` | one joint estimate of small changes on top of an incumbent: its runs, their order, the effects |
| `guard:CONFIG` | the numerics guard's verdict on a configuration |
| `guard-run:CONFIG@seedN` | one guard training run at one seed: status, loss curve, held-out figures |
| `challenge:ID`, `claim:UNIT` | which worker holds a unit of work (`fitspeed.search.workers`) |
| `incumbents` | the chain of configurations that became the incumbent, in order |
| `refused:ID` | a combination the search proposed and refused before any trial: its changes and the reason |
| `leaned` | the incumbent the lean step left (`fitspeed.search.lean`): done for that chain |
| `verification` | the verified answer: the claim the user sees |

`summary.py` and `workers.py` read these through this module.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import statistics
import time
from collections.abc import Iterator, Mapping
from typing import Any

import optuna
from optuna.trial import TrialState

from fitspeed.core.config import TrialConfig, config_key
from fitspeed.core.json_data import JSONObject
from fitspeed.core.record import TrialRecord
from fitspeed.core.sequential import Noise, pooled_noise, welch
from fitspeed.search import studies
from fitspeed.search.decision import Decision
from fitspeed.search.guard import numeric_changes
from fitspeed.search.phase import Phase

DECISION = "decision:"
FACTORIAL = "factorial:"
GUARD = "guard:"
GUARD_RUN = "guard-run:"
CHALLENGE = "challenge:"
CLAIM = "claim:"
INCUMBENTS = "incumbents"
REFUSED = "refused:"
VERIFICATION = "verification"
LEANED = "leaned"
SEARCHED = "searched"  # the --trials budget a run of the study searched to its end with (`Tuner._search`)
BUDGET = "budget"
TUNE_S = "tune_s"  # the study's wall time in seconds, over every run of it (`Tuner.run`, `fitspeed.search.cost`)
CONCLUSIONS = (DECISION, FACTORIAL, GUARD, GUARD_RUN, CHALLENGE, CLAIM, REFUSED, "reuse:")  # "reuse:" in studies made before the ledger
BUDGET_FREE = (Phase.BATCH_SIZE, Phase.LEAN, Phase.VERIFY)  # phases outside the search's share of --trials


def guard_key(config: TrialConfig) -> str:
    return GUARD + config_key(config)


def guard_run_key(config: TrialConfig, seed: int) -> str:
    return f"{GUARD_RUN}{config_key(config)}@seed{seed}"


def decisions_of(attrs: Mapping[str, Any]) -> list[Decision]:
    """Every stored decision in study user attrs `attrs`, in the order made."""
    stored = sorted((v for k, v in attrs.items() if k.startswith(DECISION)), key=lambda d: d["order"])
    return [Decision.from_dict(d) for d in stored]


def guards_of(attrs: JSONObject) -> dict[str, JSONObject]:
    """The guard verdicts in `attrs`, by configuration key."""
    return {k[len(GUARD):]: v for k, v in attrs.items() if k.startswith(GUARD)}


def refusals_of(attrs: JSONObject) -> list[dict[str, str]]:
    """The combinations the search refused before any trial (`Ledger.put_refusal`), by their changes."""
    return sorted((dict(v) for k, v in attrs.items() if k.startswith(REFUSED)), key=lambda r: r["changes"])


def meta_of(attrs: JSONObject) -> JSONObject:
    """The study's settings and environment: the user attrs that are not conclusions."""
    return {k: v for k, v in attrs.items() if not k.startswith(CONCLUSIONS) and k not in (VERIFICATION, INCUMBENTS, LEANED, SEARCHED)}


class Ledger:
    """Reads and writes a study's conclusions; counts its budget."""

    def __init__(self, study: optuna.Study, base: TrialConfig, trials: int, time_s: float | None,
                 reserve: int) -> None:
        self.study = study
        self.base = base
        self.trials = trials
        self.time_s = time_s
        self.reserve = reserve  # budgeted trials kept for the verification (and, while `held_back`, a later phase)
        self.held = 0  # of which kept for a later phase (`held_back`)
        self.started = time.perf_counter()

    # -- the budget ----------------------------------------------------------

    def searched_to_its_end(self) -> bool:
        """Whether an earlier run searched this study to its end with this --trials or more, and no --time.

        The lean step changes the incumbent after the search; a search run
        again from there decides challenges it never made before, and a new
        answer is leaned and verified again: a finished study's answer stands.
        A run with --time asks for that much more search, and gets it.
        """
        done = self.study.user_attrs.get(SEARCHED)
        return self.time_s is None and isinstance(done, int) and self.trials <= done

    def mark_searched(self) -> None:
        """This run searched the study to its end with its --trials (`searched_to_its_end`)."""
        self.study.set_user_attr(SEARCHED, self.trials)

    def claimed(self) -> int:
        """Budgeted configurations measured, being measured, or waiting to be measured again."""
        live = (TrialState.RUNNING, TrialState.WAITING)
        return len({t.user_attrs["config_key"] for t in self.study.get_trials(deepcopy=False)
                    if t.user_attrs.get("config_key") and t.user_attrs.get("phase") not in BUDGET_FREE
                    and (t.state in live or "record" in t.user_attrs)})

    def search_budget(self) -> int:
        """The trials the search may use: --trials less what the verification is expected to need."""
        return max(0, self.trials - self.reserve)

    @contextlib.contextmanager
    def held_back(self, trials: int) -> Iterator[None]:
        """Within it, the search's budget is `trials` smaller (kept for a later phase)."""
        self.reserve += trials
        self.held += trials
        try:
            yield
        finally:
            self.reserve -= trials
            self.held -= trials

    def left(self) -> int:
        """Trials of the search's budget not yet claimed."""
        return max(0, self.search_budget() - self.claimed())

    def spent(self, ahead: int = 0) -> bool:
        """The search's budget is used up, or would be after `ahead` more trials."""
        if self.claimed() + ahead >= self.search_budget():
            return True
        return self.time_s is not None and time.perf_counter() - self.started > self.time_s

    # -- measurements --------------------------------------------------------

    def figure(self, config: TrialConfig) -> float | None:
        """The median of `config`'s measured figures in this study."""
        found = self.figures(config)
        return statistics.median(found) if found else None

    def figures(self, config: TrialConfig) -> list[float]:
        prefix = config_key(config)
        speeds = [TrialRecord.from_dict(t.user_attrs["record"]).throughput for k, t in studies.measured(self.study).items()
                  if k.startswith(prefix) and (k == prefix or k[len(prefix)] == "#")]
        return [s for s in speeds if s]

    def screen_baselines(self) -> list[float]:
        """The baseline's figures from the screen, in the order measured."""
        out = []
        base = config_key(self.base)
        for key, trial in studies.measured(self.study).items():
            if trial.user_attrs.get("phase") == Phase.BASELINE and key.startswith(base):
                tag = key[len(base):]
                if tag == "" or tag.startswith("#screen"):
                    speed = TrialRecord.from_dict(trial.user_attrs["record"]).throughput
                    if speed:
                        out.append((trial.number, speed))
        return [speed for _, speed in sorted(out)]

    def screen_reference(self) -> float | None:
        speeds = self.screen_baselines()
        return statistics.median(speeds) if speeds else None

    # -- decisions -----------------------------------------------------------

    def decisions(self) -> list[Decision]:
        return decisions_of(self.study.user_attrs)

    def decision(self, ident: str) -> Decision | None:
        found = self.study.user_attrs.get(DECISION + ident)
        return Decision.from_dict(found) if found else None

    def put_decision(self, decision: Decision) -> bool:
        """Store `decision` under its id (its order kept if it was stored before); True if it changed."""
        stored = self.study.user_attrs.get(DECISION + decision.id)
        order = stored["order"] if stored else sum(k.startswith(DECISION) for k in self.study.user_attrs)
        plain = studies.plain({**decision.to_dict(), "order": order})
        self.study.set_user_attr(DECISION + decision.id, plain)
        return not stored or stored != plain

    def put_refusal(self, changes: str, reason: str) -> None:
        """Store why the search did not measure `changes` (one entry per reason, whichever worker said it)."""
        ident = hashlib.sha256(reason.encode()).hexdigest()[:12]
        if REFUSED + ident not in self.study.user_attrs:
            self.study.set_user_attr(REFUSED + ident, {"changes": changes, "reason": reason})

    def factorial(self, ident: str) -> JSONObject | None:
        found = self.study.user_attrs.get(FACTORIAL + ident)
        return dict(found) if found else None

    def factorials(self) -> list[JSONObject]:
        """Every stored joint estimate."""
        return [dict(v) for k, v in self.study.user_attrs.items() if k.startswith(FACTORIAL) and v]

    def put_factorial(self, ident: str, factorial: JSONObject) -> None:
        self.study.set_user_attr(FACTORIAL + ident, studies.plain(factorial))

    def noise(self) -> Noise | None:
        """The noise on a paired log ratio from this study's trials so far, with its source stated.

        The screen's baseline trials but the first (a cold start: measured at
        0.63x of the rest here once), scaled by sqrt(2): their spread around
        their median is that of a paired log ratio. And every paired decision's pairs, around each decision's own
        median (the screen's one-trial verdicts are not pairs).
        """
        speeds = self.screen_baselines()[1:]
        groups = [[math.sqrt(2) * math.log(s) for s in speeds]]
        pairs = [[math.log(b / a) for a, b in d.pairs if a and b]
                 for d in self.decisions() if d.purpose != Phase.SCREEN]
        groups += pairs
        used = sum(len(p) for p in pairs if len(p) > 1)
        decisions = sum(len(p) > 1 for p in pairs)
        source = (f"{len(speeds)} screen baseline trials and {used} pairs of {decisions} "
                  f"decision{'' if decisions == 1 else 's'} before this one")
        return pooled_noise(groups, source=source)

    def trial_noise(self, config: TrialConfig, leave_out: str = "") -> Noise | None:
        """`config`'s own trial-to-trial noise on a log figure, from its trials in this study, or None.

        Every measured trial of `config` counts (its screen trial, its pairs in
        earlier decisions, a sampler's trial) except those of decision
        `leave_out` (a decision's own pairs are its own evidence, never its
        prior too) and the study's first trial (a cold start: measured at 0.63x
        of the rest here once). Fewer than two trials: None.
        """
        prefix = config_key(config)
        measured = studies.measured(self.study)
        first = min((t.number for t in measured.values()), default=None)
        logs = []
        for key, trial in measured.items():
            tag = key[len(prefix):]
            if not key.startswith(prefix) or (tag and not tag.startswith("#")) or trial.number == first:
                continue
            if leave_out and tag.startswith(f"#{leave_out}:"):
                continue
            speed = TrialRecord.from_dict(trial.user_attrs["record"]).throughput
            if speed:
                logs.append(math.log(speed))
        return pooled_noise([logs], source=f"{len(logs)} trials of {config.label()}")

    def pair_noise(self, a: TrialConfig, b: TrialConfig, leave_out: str = "") -> Noise | None:
        """The noise on log(B/A) from each side's own trials (`trial_noise`), Welch-combined; None where either
        side has fewer than two: a configuration noisier than the rest never borrows the rest's noise."""
        mine, theirs = self.trial_noise(a, leave_out), self.trial_noise(b, leave_out)
        source = f"each side's own trials ({mine.source if mine else 'none'}; {theirs.source if theirs else 'none'})"
        return welch(mine, theirs, source)

    # -- the chain of incumbents ---------------------------------------------

    def incumbents(self) -> list[TrialConfig]:
        """The configurations that became the incumbent, in order; the last is the best found."""
        return [TrialConfig.from_dict(c) for c in self.study.user_attrs.get(INCUMBENTS) or []]

    def rejected(self) -> set[tuple[str, Any]]:
        """The numerics changes (knob, value) that made a configuration fail the guard: not tried again.

        One is named where it is the only numerics change of a configuration that failed that no
        configuration that passed holds.
        """
        judged = [(set(numeric_changes(TrialConfig.from_dict(json.loads(key)), self.base).items()), verdict["ok"])
                  for key, verdict in guards_of(self.study.user_attrs).items() if verdict]
        passed = {item for changes, ok in judged if ok for item in changes}
        return {item for changes, ok in judged if not ok and len(changes - passed) == 1
                for item in changes - passed}

    def incumbent(self) -> TrialConfig:
        return (self.incumbents() or [self.base])[-1]

    def chain_add(self, config: TrialConfig, over: TrialConfig, again: bool = False) -> bool:
        """Append `config` to the incumbents if it beat the newest; False if another's came first (hold the lock).

        `again`: `config` may have been an incumbent before (the lean step goes back to one); it is appended
        unless it is the newest already.
        """
        chain = list(self.study.user_attrs.get(INCUMBENTS) or [])
        if (chain and chain[-1] == studies.plain(config.to_dict())) or (config.to_dict() in chain and not again):
            return True
        if (chain[-1] if chain else self.base.to_dict()) != studies.plain(over.to_dict()):
            return False
        chain.append(config.to_dict())
        self.study.set_user_attr(INCUMBENTS, studies.plain(chain))
        return True

    def verification(self) -> JSONObject | None:
        found = self.study.user_attrs.get(VERIFICATION)
        return dict(found) if found else None

    def put_verification(self, verification: JSONObject) -> None:
        self.study.set_user_attr(VERIFICATION, studies.plain(verification))
