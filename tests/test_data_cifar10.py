"""CIFAR-10 grayscale: both source layouts, LRA's conversion, val split, pixel 0 kept, bad input."""

from __future__ import annotations

import pickle
import tarfile
from pathlib import Path

import numpy as np
import pytest

from fixtures_data import (CIFAR_CLASSES, add_bytes, cifar_images, md5, read_rows, tar_directory,
                           write_cifar_folder, write_cifar_python_archive)
from hkt.data.families import cifar10
from hkt.data.parquet import read_metadata
from hkt.data.prepare import prepare_task
from hkt.errors import DataError

BASE = ["prepare.val_size=10"]


def reference_gray(rgb: np.ndarray) -> np.ndarray:
    """LRA: tf.image.rgb_to_grayscale on uint8 (float32 math), written out independently."""
    x = rgb.astype(np.float32) / np.float32(255)
    y = np.tensordot(x, np.array([0.2989, 0.5870, 0.1140], dtype=np.float32), axes=([-1], [-1]))
    return np.clip((y * np.float32(255.5)).astype(np.int64), 0, 255)  # cast truncates, then saturate


@pytest.fixture(scope="module")
def images():
    return cifar_images(n_train=40, n_test=20)


@pytest.fixture(scope="module")
def python_archive(tmp_path_factory, images) -> Path:
    return write_cifar_python_archive(tmp_path_factory.mktemp("c") / "cifar-alt-python.tar.gz", images)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory, python_archive) -> Path:
    out = tmp_path_factory.mktemp("c-out")
    prepare_task("cifar10", out, source=python_archive, overrides=BASE)
    return out


def test_known_gray_values():
    rgb = np.array([[0, 0, 0], [255, 255, 255], [255, 0, 0], [0, 255, 0], [0, 0, 255], [1, 1, 1]], np.uint8)
    # 0.2989*255.5 = 76.37 -> 76; 0.5870*255.5 = 149.98 -> 149; 0.1140*255.5 = 29.13 -> 29; white 255
    assert cifar10.to_gray(rgb).tolist() == [0, 255, 76, 149, 29, 1]
    x = np.random.default_rng(0).integers(0, 256, (5000, 3), dtype=np.uint8)
    assert np.array_equal(cifar10.to_gray(x), reference_gray(x))


def test_official_layout_round_trip_and_val_rule(prepared, images):
    x, y = images["train"]
    xt, yt = images["test"]
    gray = reference_gray(x).reshape(len(x), -1)
    gray_t = reference_gray(xt).reshape(len(xt), -1)
    splits = {s: read_rows(prepared / f"{s}.parquet") for s in ("train", "val", "test")}
    assert [len(splits[s]) for s in ("train", "val", "test")] == [30, 10, 20]
    for split, rows in splits.items():
        meta = read_metadata(prepared / f"{split}.parquet")
        assert meta["vocab_size"] == 256 and meta["pad_id"] is None and meta["max_length"] == 1024
        assert meta["class_names"] == CIFAR_CLASSES and meta["source"]["layout"] == "official python batches"
        for rid, (t, lab, _) in rows.items():
            s, i = rid.split("/")
            i = int(i)
            ref, ref_y = (gray_t[i], yt[i]) if s == "test" else (gray[i], y[i])
            assert len(t) == 1024 and t == ref.tolist() and lab == ref_y
            if split == "val":
                assert s == "train" and i >= 30          # the last 10 of train, in official order
            elif split == "train":
                assert i < 30
    assert splits["test"]["test/00000"][0] == [0] * 1024  # pixel value 0 is a token, not dropped as padding


def test_image_folder_gives_same_pixels(tmp_path, images, prepared):
    root = write_cifar_folder(tmp_path / "tree" / "cifar-png", images)
    out = tmp_path / "out"
    arch = tar_directory(root, tmp_path / "cifar-png.tar.gz", "cifar-png")
    prepare_task("cifar10", out, source=arch, overrides=BASE)
    by_content = {}
    for s in ("train", "val", "test"):
        for t, lab, _ in read_rows(prepared / f"{s}.parquet").values():
            by_content[(s if s == "test" else "train", tuple(t))] = lab
    got = {s: read_rows(out / f"{s}.parquet") for s in ("train", "val", "test")}
    assert [len(got[s]) for s in ("train", "val", "test")] == [30, 10, 20]
    for s, rows in got.items():
        for rid, (t, lab, _) in rows.items():
            assert by_content[(s if s == "test" else "train", tuple(t))] == lab  # lossless PNG: identical
            assert rid.split("/")[1] == CIFAR_CLASSES[lab]
    assert sorted(lab for _, lab, _ in got["val"].values()) == list(range(10))  # the last file of each class
    # also straight from the directory
    out2 = tmp_path / "out2"
    prepare_task("cifar10", out2, source=root, overrides=BASE)
    assert list(read_rows(out2 / "test.parquet").items()) == list(got["test"].items())  # same rows, same order


def test_official_checksum_verified_in_mirror(tmp_path, images, monkeypatch):
    mirror = tmp_path / "mirror"
    arch = write_cifar_python_archive(mirror / "cifar10" / "cifar-10-python.tar.gz", images)
    monkeypatch.setenv("HKT_DATA_MIRROR", str(mirror))
    with pytest.raises(DataError) as err:
        prepare_task("cifar10", tmp_path / "o1", overrides=BASE)
    assert "c58f30108f718f92721af3b95e74349a" in str(err.value) and md5(arch) in str(err.value)
    prepare_task("cifar10", tmp_path / "o2", overrides=[*BASE, f"prepare.md5={md5(arch)}"])
    assert read_metadata(tmp_path / "o2" / "val.parquet")["source"]["official"] is True


def test_unreadable_and_wrong_size_images(tmp_path, images):
    root = write_cifar_folder(tmp_path / "t", images)
    bad = root / "train" / "cat" / "0000.png"
    bad.write_bytes(b"not a png")
    with pytest.raises(DataError, match=r"cannot decode image train/cat/0000.png"):
        prepare_task("cifar10", tmp_path / "o", source=root, overrides=BASE)
    from PIL import Image

    Image.new("RGB", (16, 16)).save(bad)
    with pytest.raises(DataError, match=r"16x16; expected 32x32"):
        prepare_task("cifar10", tmp_path / "o", source=root, overrides=BASE)


def test_layout_errors(tmp_path, images):
    root = write_cifar_folder(tmp_path / "t", images)
    (root / "train" / "cat").rename(root / "train" / "kitten")
    with pytest.raises(DataError, match=r"unknown classes \['kitten'\]"):
        prepare_task("cifar10", tmp_path / "o", source=root, overrides=BASE)
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match=r"expected cifar-10-batches-py"):
        prepare_task("cifar10", tmp_path / "o", source=tmp_path / "empty", overrides=BASE)
    # an incomplete set of python batches
    arch = tmp_path / "partial.tar.gz"
    with tarfile.open(arch, "w:gz") as tf:
        add_bytes(tf, "cifar-10-batches-py/data_batch_1", b"")
    with pytest.raises(DataError, match="lacks data_batch_2"):
        prepare_task("cifar10", tmp_path / "o", source=arch, overrides=BASE)


class _Evil:
    def __reduce__(self):
        return (print, ("pwned",))


def test_pickle_with_code_is_refused(tmp_path, images):
    arch = tmp_path / "evil.tar.gz"
    write_cifar_python_archive(tmp_path / "good.tar.gz", images)
    with tarfile.open(tmp_path / "good.tar.gz") as src, tarfile.open(arch, "w:gz") as dst:
        for m in src:
            data = src.extractfile(m).read()
            if m.name.endswith("data_batch_1"):
                data = pickle.dumps({b"data": _Evil(), b"labels": []})
            add_bytes(dst, m.name, data)
    with pytest.raises(DataError, match="not allowed"):
        prepare_task("cifar10", tmp_path / "o", source=arch, overrides=BASE)
