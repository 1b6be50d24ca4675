"""`JSONObject`: a dict at the JSON or Optuna boundary, named so.

A value typed `JSONObject` is plain data on its way to or from a file, a
record or a study's user attrs: whatever JSON holds, read by key. Between
layers the contracts are typed (`TrialRecord`, `Decision`, `StudySummary`);
a `JSONObject` is where the data is still, or again, text.
"""

from __future__ import annotations

from typing import Any, TypeAlias

JSONObject: TypeAlias = dict[str, Any]
