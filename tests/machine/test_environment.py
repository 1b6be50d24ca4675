"""What the environment record says about the CPU: its relevant features and oneDNN's default."""

from __future__ import annotations

from pathlib import Path

from fitspeed.machine import environment

ZEN3 = "processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu sse2 avx fma avx2 sha_ni\n"
EMERALD_RAPIDS = ("processor\t: 0\nflags\t\t: fpu avx2 fma avx512f avx512_vnni avx512_bf16 avx512_fp16 "
                  "amx_bf16 amx_tile amx_int8\n")
GRAVITON = "processor\t: 0\nFeatures\t: fp asimd evtstrm sve bf16\n"


def test_features_are_read_from_cpuinfo_flags() -> None:
    assert environment.cpu_features(environment.cpu_flags(ZEN3)) == ["avx2", "fma"]
    assert environment.cpu_features(environment.cpu_flags(EMERALD_RAPIDS)) == [
        "avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8"]
    assert environment.cpu_features(environment.cpu_flags(GRAVITON)) == ["asimd", "sve", "bf16"]
    assert environment.cpu_flags("no flags here") == frozenset()


def test_tensorflows_onednn_rule() -> None:
    assert environment.onednn_default(environment.cpu_flags(ZEN3), "x86_64") is False
    assert environment.onednn_default(environment.cpu_flags(EMERALD_RAPIDS), "x86_64") is True
    assert environment.onednn_default(environment.cpu_flags(GRAVITON), "aarch64") is None
    assert environment.onednn_default(frozenset(), "x86_64") is None


def test_host_names_this_cpus_features() -> None:
    host = environment.host()
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    assert host["cpu_features"] == environment.cpu_features(environment.cpu_flags(text))
    assert set(host["cpu_features"]) <= set(environment.CPU_FEATURES)
