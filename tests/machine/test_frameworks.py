"""Each backend's framework calls sit in a subclass of its core class, reached by the same name."""

from __future__ import annotations

import pytest

from fitspeed.core.backends import NAMES, backend_of
from fitspeed.core.errors import KnobError
from fitspeed.machine.frameworks import FRAMEWORKS, framework_of


@pytest.mark.parametrize("name", NAMES)
def test_each_framework_is_its_backend(name: str) -> None:
    framework = framework_of(name)
    assert isinstance(framework, type(backend_of(name)))
    assert framework.name == name
    assert framework.cannot_turn == backend_of(name).cannot_turn


def test_every_backend_has_a_framework_and_no_other_name_does() -> None:
    assert tuple(FRAMEWORKS) == NAMES
    with pytest.raises(KnobError, match="Received: 'mxnet'"):
        framework_of("mxnet")


def test_a_trace_hint_names_the_plugin_its_profiler_writes_for() -> None:
    assert "torch-tb-profiler" in framework_of("torch").trace_hint("run")[1]
    assert framework_of("jax").trace_hint("run") == framework_of("tensorflow").trace_hint("run")
    assert "xprof" in framework_of("jax").trace_hint("run")[1]
