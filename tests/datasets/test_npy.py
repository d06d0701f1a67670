import numpy as np
import pytest
from kedro.io.core import DatasetError, Version

from leap_kalm.datasets import NpyDataset


def test_array_round_trip(tmp_path):
    ds = NpyDataset(filepath=str(tmp_path / "a.npy"))
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    ds.save(array)
    loaded = ds.load()
    assert loaded.dtype == np.float32 and np.array_equal(loaded, array)


def test_dict_round_trip_in_kalm_format(tmp_path):
    path = tmp_path / "kalm.npy"
    data = {
        "observations": np.zeros((2, 3, 10), np.float32),
        "instructions": np.array([["a"], ["b"]]),
    }
    NpyDataset(filepath=str(path), allow_pickle=True).save(data)
    raw = np.load(path, allow_pickle=True)  # the file is what KALM's loaders expect
    assert raw.shape == () and raw.dtype == object and set(raw.item()) == set(data)
    loaded = NpyDataset(filepath=str(path), allow_pickle=True).load()
    assert loaded["observations"].shape == (2, 3, 10)
    assert loaded["instructions"].tolist() == [["a"], ["b"]]


def test_dict_needs_allow_pickle(tmp_path):
    path = str(tmp_path / "d.npy")
    with pytest.raises(DatasetError, match="allow_pickle: true"):
        NpyDataset(filepath=path).save({"a": np.zeros(2)})
    NpyDataset(filepath=path, allow_pickle=True).save({"a": np.zeros(2)})
    with pytest.raises(DatasetError, match=r"d\.npy: holds pickled objects"):
        NpyDataset(filepath=path).load()


@pytest.mark.parametrize("allow_pickle", [False, True])
def test_truncated_file_is_named(tmp_path, allow_pickle):
    path = tmp_path / "t.npy"
    payload = {"a": np.zeros(1000)} if allow_pickle else np.zeros(1000)
    NpyDataset(filepath=str(path), allow_pickle=allow_pickle).save(payload)
    path.write_bytes(path.read_bytes()[:300])
    with pytest.raises(DatasetError, match=r"t\.npy: not a readable \.npy file"):
        NpyDataset(filepath=str(path), allow_pickle=allow_pickle).load()


def test_versioning(tmp_path):
    path = str(tmp_path / "v.npy")
    NpyDataset(filepath=path, version=Version(None, "2026-01-01T00.00.00.000Z")).save(np.ones(2))
    NpyDataset(filepath=path, version=Version(None, "2026-01-02T00.00.00.000Z")).save(np.ones(3))
    assert NpyDataset(filepath=path, version=Version(None, None)).load().shape == (3,)
    assert NpyDataset(
        filepath=path, version=Version("2026-01-01T00.00.00.000Z", None)
    ).load().shape == (2,)


def test_missing_file(tmp_path):
    with pytest.raises(DatasetError, match="no file at"):
        NpyDataset(filepath=str(tmp_path / "none.npy")).load()
