import threading

import numpy as np
import pytest
from kedro.io.core import DatasetError, Version

from leap_kalm.datasets import HDF5Dataset


def _data():
    return {
        "observations": np.random.default_rng(0).normal(size=(4, 5, 10)).astype(np.float32),
        "actions": np.arange(20, dtype=np.int32).reshape(4, 5),
        "terminals": np.zeros((4, 5, 1), dtype=bool),
        "instructions": np.array(
            [["push the red ball", "move red"], ["a", "b"], ["c", "d"], ["é", "✓"]]
        ),
        "meta": {"seeds": np.arange(4)},
        "_attrs": {"env": "clevr", "horizon": 5},
    }


def test_round_trip_keeps_dtypes_strings_groups_and_attrs(tmp_path):
    ds = HDF5Dataset(filepath=str(tmp_path / "d.hdf5"), compression="gzip")
    data = _data()
    ds.save(data)
    loaded = ds.load()
    assert loaded["observations"].dtype == np.float32
    np.testing.assert_array_equal(loaded["observations"], data["observations"])
    assert loaded["actions"].dtype == np.int32
    assert loaded["terminals"].dtype == bool
    assert loaded["instructions"].tolist() == data["instructions"].tolist()
    np.testing.assert_array_equal(loaded["meta"]["seeds"], np.arange(4))
    assert loaded["_attrs"] == {"env": "clevr", "horizon": 5}


def test_truncated_file_is_named(tmp_path):
    path = tmp_path / "trunc.hdf5"
    HDF5Dataset(filepath=str(path)).save(_data())
    path.write_bytes(path.read_bytes()[:1500])
    with pytest.raises(DatasetError, match=r"trunc\.hdf5: not a readable HDF5 file"):
        HDF5Dataset(filepath=str(path)).load()


def test_garbage_file_is_named(tmp_path):
    path = tmp_path / "garbage.hdf5"
    path.write_bytes(b"this is not hdf5" * 10)
    with pytest.raises(DatasetError, match=r"garbage\.hdf5"):
        HDF5Dataset(filepath=str(path)).load()


def test_non_dict_is_rejected(tmp_path):
    with pytest.raises(DatasetError, match="saves a dict of arrays"):
        HDF5Dataset(filepath=str(tmp_path / "x.hdf5")).save(np.zeros(3))


def test_versioning(tmp_path):
    path = str(tmp_path / "v.hdf5")
    HDF5Dataset(filepath=path, version=Version(None, "2026-01-01T00.00.00.000Z")).save(
        {"a": np.ones(2)}
    )
    HDF5Dataset(filepath=path, version=Version(None, "2026-01-02T00.00.00.000Z")).save(
        {"a": np.ones(3)}
    )
    assert HDF5Dataset(filepath=path, version=Version(None, None)).load()["a"].shape == (3,)
    assert HDF5Dataset(filepath=path, version=Version("2026-01-01T00.00.00.000Z", None)).load()[
        "a"
    ].shape == (2,)


def test_concurrent_threads(tmp_path):
    errors = []

    def work(i):
        try:
            ds = HDF5Dataset(filepath=str(tmp_path / f"t{i}.hdf5"))
            for _ in range(5):
                ds.save({"x": np.full((50, 50), i)})
                assert int(ds.load()["x"][0, 0]) == i
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
