"""What the batch-size sweep found, in one sentence, from the study summary's figures (`fitspeed.search.batch_figures`)."""

from __future__ import annotations

from fitspeed.core.json_data import JSONObject


def sentence(figures: JSONObject) -> str | None:
    """What the sweep found, in one sentence; None when nothing ran out of memory.

    >>> sentence({"needed_remat": [128], "largest_fitting": 128, "largest_without_remat": 64, "first_oom": 256,
    ...           "recommended_max": 112})
    'largest batch that fit: 128, with remat (keras.RematScope mode full: 64 without); out of memory at 256 even with it. With a margin, use at most 112.'
    """
    if not figures["first_oom"] and not figures["needed_remat"]:
        return None
    if figures["needed_remat"]:
        head = (f"largest batch that fit: {figures['largest_fitting']}, with remat (keras.RematScope mode full: "
                f"{figures['largest_without_remat'] or 'none'} without)")
        tail = f"; out of memory at {figures['first_oom']} even with it" if figures["first_oom"] else ""
    else:
        head = f"largest batch that fit: {figures['largest_fitting']}"
        tail = f"; out of memory at {figures['first_oom']}"
    return head + tail + f". With a margin, use at most {figures['recommended_max']}."
