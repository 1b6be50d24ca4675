"""The batch-size sweep's figures, rematerialization counted (`fitspeed.search.batch_sizes`).

A size that ran out of memory is measured again with `remat=full`; the study
keeps both rows. Here a size fits when any of its rows fit, it *needed remat*
when only its remat row did, and the first out-of-memory is the first size
that fit in no way. The study summary (`show --json`), the terminal table and
the HTML page all read these.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fitspeed.core.json_data import JSONObject
from fitspeed.core.record import Status


def figures(rows: Sequence[Mapping[str, Any]], base: Mapping[str, Any]) -> JSONObject:
    """Rows with their size and remat mode; the largest size that fit, with and without remat; the first OOM.

    `rows` are the summary's rows of the sweep (the baseline's among them), `base` the baseline's config.

    >>> rows = [{"changes": {"batch_size": 64}, "status": "ok"},
    ...         {"changes": {"batch_size": 128}, "status": "oom"},
    ...         {"changes": {"batch_size": 128, "remat": "full"}, "status": "ok"},
    ...         {"changes": {"batch_size": 256}, "status": "oom"},
    ...         {"changes": {"batch_size": 256, "remat": "full"}, "status": "oom"}]
    >>> out = figures(rows, {"batch_size": 32, "remat": "off"})
    >>> [(r["batch_size"], r["remat"], r["status"]) for r in out["rows"]][:3]
    [(64, 'off', 'ok'), (128, 'off', 'oom'), (128, 'full', 'ok')]
    >>> out["needed_remat"], out["largest_fitting"], out["largest_without_remat"], out["first_oom"]
    ([128], 128, 64, 256)
    >>> out["recommended_max"]
    112
    """
    rows = [{**row, "batch_size": row["changes"].get("batch_size", base["batch_size"]),
             "remat": row["changes"].get("remat", base.get("remat", "off"))} for row in rows]
    rows.sort(key=lambda r: (r["batch_size"], r["remat"] != "off"))
    fit = {r["batch_size"] for r in rows if r["status"] == Status.OK}
    plain = {r["batch_size"] for r in rows if r["status"] == Status.OK and r["remat"] == "off"}
    oom = {r["batch_size"] for r in rows if r["status"] == Status.OOM} - fit
    largest = max(fit, default=None)
    first_oom = min((size for size in oom if largest is None or size > largest), default=None)
    # a margin: 10% below the largest that fit, rounded down to a multiple of 8
    safe = max(8, largest * 9 // 10 // 8 * 8) if largest and first_oom else largest
    return {"rows": rows, "needed_remat": sorted(fit - plain), "largest_fitting": largest,
            "largest_without_remat": max(plain, default=None), "first_oom": first_oom, "recommended_max": safe}
