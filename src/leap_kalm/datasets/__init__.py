"""Kedro datasets the library lacks: JSONL, npy, HDF5, model directories, d3rlpy learnables."""

from leap_kalm.datasets.d3 import D3Dataset
from leap_kalm.datasets.hdf5 import HDF5Dataset
from leap_kalm.datasets.jsonl import JSONLDataset
from leap_kalm.datasets.kalm import KalmDataset, KalmPromptsDataset, KalmRolloutsDataset
from leap_kalm.datasets.model_dir import ModelDirDataset
from leap_kalm.datasets.npy import NpyDataset

__all__ = [
    "D3Dataset",
    "HDF5Dataset",
    "JSONLDataset",
    "KalmDataset",
    "KalmPromptsDataset",
    "KalmRolloutsDataset",
    "ModelDirDataset",
    "NpyDataset",
]
