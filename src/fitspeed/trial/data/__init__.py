"""A trial's data: loading each kind of source and feeding it to `fit()`.

`sources` holds the `Data` type and loads synthetic arrays, `.npz` files,
`keras.datasets`, a user's `module:function`, image folders and the
`pyloader`; `image_folder` lists an `images:DIR` folder; `pipeline` builds
tf.data pipelines and applies the input knobs; `layout` owns the
channels_first transpose and the check that data fits the model; `fit_input`
turns data into `fit()` arguments covering exactly the steps asked for;
`fit_args` sorts what a user's script handed `fit()` into a `Data`;
`loaders` is the CPU-heavy PyDataset of article 002.

Runs in the trial child only. May import `fitspeed.core` and the frameworks.
"""
