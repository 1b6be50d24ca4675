"""The machine: what it is and what it is doing.

`environment` records the host, the libraries and the accelerators;
`frameworks` holds each backend's framework calls (devices, peak memory,
threads, determinism, profiler), one class per backend; `nvml` is
the thin boundary to NVIDIA's driver; `sampler` samples CPU, memory, a
process tree and GPUs on a thread; `usage` turns samples into the figures a
record keeps; `watch` runs or follows a command while sampling (the engine of
`fitspeed monitor`).

May import: `fitspeed.core`, psutil and pynvml. A framework only inside a
function that runs in a trial child (`environment.collect`, `frameworks`).
"""
