"""The data a reproduction chooses: the user's .npz (resized, split), or templates; no trials."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fitspeed.core.errors import UserError
from fitspeed.reproduce.data import choose


def test_a_users_npz_is_scaled_halved_and_split(tmp_path: Path) -> None:
    x = np.random.default_rng(0).integers(0, 256, size=(50, 32, 32, 3)).astype("uint8")
    np.savez(tmp_path / "mine.npz", x=x, y=np.arange(50) % 10)
    choice = choose(f"npz:{tmp_path / 'mine.npz'}", (16, 16, 3), 1000, 5, tmp_path / "out")
    assert choice.real and choice.name == "mine.npz (--data)"
    with np.load(choice.ref[4:]) as saved:
        assert saved["x"].shape == (45, 16, 16, 3) and saved["x_test"].shape == (5, 16, 16, 3)
        assert 0.0 <= float(saved["x"].min()) and float(saved["x"].max()) <= 1.0
        assert saved["y_test"].tolist() == [5, 6, 7, 8, 9]  # the last samples are held out
        expected = x[0, :2, :2].astype("float32").mean(axis=(0, 1)) / 255.0
        assert np.allclose(saved["x"][0, 0, 0], expected, atol=1e-6)  # each pixel: a 2x2 block's mean


def test_without_data_the_templates_are_used(tmp_path: Path) -> None:
    choice = choose("synthetic", (16, 16, 3), 64, 16, tmp_path)
    assert not choice.real and "class templates" in choice.name
    with np.load(choice.ref[4:]) as saved:
        assert saved["x"].shape == (64, 16, 16, 3) and saved["y_test"].shape == (16,)


@pytest.mark.parametrize(("data", "words"), [("cifar10", "Expected --data synthetic or npz:PATH"),
                                             ("npz:missing.npz", "which does not exist")])
def test_bad_data_is_a_clear_error(tmp_path: Path, data: str, words: str) -> None:
    with pytest.raises(UserError, match=words):
        choose(data, (16, 16, 3), 64, 16, tmp_path)


def test_images_that_do_not_fit_the_models_are_refused(tmp_path: Path) -> None:
    np.savez(tmp_path / "mnist.npz", x=np.zeros((20, 28, 28), dtype="uint8"), y=np.zeros(20))
    with pytest.raises(UserError, match="Expected images of shape"):
        choose(f"npz:{tmp_path / 'mnist.npz'}", (16, 16, 3), 64, 4, tmp_path / "out")
