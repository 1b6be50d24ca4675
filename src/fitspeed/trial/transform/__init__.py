"""Model rewrites with proof of equivalence: data_format and the precision of the output.

A knob that changes a model must not change what it computes. `rewrite` moves a
user's Keras model between channels_last and channels_first (`layout` decides
each layer's fate, `rebuild` clones the graph with `keras.models.clone_model`
and carries the weights over), keeps its outputs float32 under a mixed dtype
policy, and `check` runs the original and the rewritten model on a probe batch:
outputs that differ by more than the stated tolerance refuse the rewrite.
Anything that cannot be rewritten safely raises `Refused`, naming the layer.

Runs in the trial child, in `fitspeed convert`'s child (`fitspeed.trial.convert`)
and in a user's process through `fitspeed.rewrite_model`. May import what
`fitspeed.trial` may; importing this package itself imports no framework.
"""

from __future__ import annotations


class Refused(Exception):
    """A rewrite that cannot be done safely: the message names the layer and says why."""
