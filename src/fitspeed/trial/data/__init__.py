"""A trial's data: loading each kind of source and feeding it to `fit()`.

`kinds` holds one class per input kind (arrays, a tf.data.Dataset, a
PyDataset, an images: folder), each answering what a trial asks of it: the
`fit()` arguments covering exactly the steps asked for, its epoch's steps,
whether it is in memory, which input knobs apply; it also sorts what a
user's script handed `fit()` into one. `sources` loads synthetic arrays,
`.npz` files, `keras.datasets`, a user's `module:function`, image folders
and the `pyloader`; `image_folder` lists an `images:DIR` folder; `pipeline`
builds tf.data pipelines and applies the input knobs; `layout` owns the
channels_first transpose and the check that data fits the model;
`loaders` is the CPU-heavy PyDataset of article 002.

Runs in the trial child only. May import `fitspeed.core` and the frameworks.
"""
