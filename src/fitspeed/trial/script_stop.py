"""Why a user's script stopped before the `fit()` a trial times: one sentence that says what to do.

The script hook (`fitspeed.trial.script_hook`) notes what it saw (the error
that escaped, a `sys.exit` or `os._exit` call, how many `fit()` calls ran)
and, at exit, turns it into the failed record's reason with `stop_reason`.
"""

from __future__ import annotations

LEGACY = (
    "Expected a script that trains with Keras 3 (`import keras` or `from tensorflow import keras`). "
    "Received a script that uses the standalone tf_keras package (Keras 2, or TF_USE_LEGACY_KERAS=1), "
    "which fitspeed cannot hook. Import keras instead of tf_keras (and unset TF_USE_LEGACY_KERAS)."
)
WATCHED = "keras.Model.fit (Keras 3: `import keras`, `from tensorflow import keras`)"


def stop_reason(name: str, error: BaseException | None, text: str, exit_call: str | None, *, fits: int,
                fit_index: int, devices: int) -> str:
    """The reason a script named `name` ended before its `fit_index`-th fit() call.

    `error` is what escaped the script (`text` its formatted traceback),
    `exit_call` the exit it called, `fits` the fit() calls it made.

    >>> stop_reason("train.py", None, "", "sys.exit(2)", fits=0, fit_index=1, devices=1)[:72]
    'Expected the script train.py to reach Model.fit(). It called sys.exit(2)'
    >>> stop_reason("train.py", None, "", None, fits=1, fit_index=2, devices=1)[:66]
    'Expected the script train.py to call Model.fit() at least 2 times '
    """
    if isinstance(error, ModuleNotFoundError) and error.name == "tf_keras":
        return LEGACY
    if error is not None and _is_data_fetch(error, text):
        return (
            f"Expected the script {name} to load its data. It could not download it ({_last_line(text)}): "
            "this machine cannot reach the internet, and keras.datasets.*.load_data() downloads on first use. "
            "Point the script at a local "
            "copy (for MNIST, put mnist.npz in ~/.keras/datasets/ or pass load_data(path=...) an absolute "
            "path, or give the script a --data FILE option), then run fitspeed again."
        )
    if error is not None and "Mixing different tf.distribute.Strategy" in text:
        return (
            f"Expected the script {name} to leave distribution to fitspeed's devices={devices}. "
            "It opens a tf.distribute strategy scope of its own, which cannot be entered inside the "
            "MirroredStrategy fitspeed made the process's strategy. Drop --set devices=... (the script "
            "distributes itself), or remove its strategy scope."
        )
    if error is not None:
        return (
            f"Expected the script {name} to reach Model.fit(). It failed before that: {_last_line(text)}. "
            "Fix the error (run the command alone to see the whole traceback; the record keeps its tail)."
        )
    if exit_call is not None:
        return (
            f"Expected the script {name} to reach Model.fit(). It called {exit_call} before that, "
            f"after {fits} fit() call(s). Remove that exit, or check the arguments you passed "
            "(argparse exits on bad ones; its message is in the trial's log)."
        )
    if fits:
        return (
            f"Expected the script {name} to call Model.fit() at least {fit_index} times (--fit "
            f"{fit_index}). It called it {fits} time(s). Use --fit 1 to time the first."
        )
    return (
        f"Expected the script {name} to train with Model.fit(). It ended without calling it. "
        f"fitspeed watches {WATCHED}; a custom loop (GradientTape, train_on_batch) or the tf_keras "
        "package is not timed. Train with model.fit(...)."
    )


def _is_data_fetch(error: BaseException, text: str) -> bool:
    """A download that failed: Keras's get_file says "URL fetch failure"; urllib and sockets say more."""
    markers = ("URL fetch failure", "urlopen error", "Name or service not known", "Temporary failure in name resolution",
               "Network is unreachable")
    chain: BaseException | None = error
    while chain is not None:
        if type(chain).__name__ in ("URLError", "gaierror", "HTTPError"):
            return True
        chain = chain.__cause__ or chain.__context__
    return any(marker in text for marker in markers)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1].rstrip(".") if lines else "an unknown error"
