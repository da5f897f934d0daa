"""Sequential CIFAR-10 (LRA "Image"): 32x32 grayscale pixels as 1024 tokens, row-major.

Sources: the official ``cifar-10-python.tar.gz`` (pickled batches ``cifar-10-batches-py/
{data_batch_1..5,test_batch}``, read with a restricted unpickler: plain containers and numpy
arrays only), or an image-folder tree ``<root>/{train,test}/<class>/*.png|jpg|jpeg`` (an archive
or a directory), decoded with Pillow.

Grayscale exactly as LRA (``tf.image.rgb_to_grayscale`` then ``convert_image_dtype``): in float32,
x = uint8 * (1/255), y = 0.2989 R + 0.5870 G + 0.1140 B, back to uint8 as ``floor(y * 255.5)``
saturated to 0..255. Tokens are the pixel values 0..255 themselves: 0 is a real (black) pixel,
not padding; models mask by length (every image has 1024 tokens, so batches have no padding).

Validation (LRA: train[:90%] / train[90%:]): the official source keeps the last ``val_size``
training images in the official order; an image folder has no global order, so the last files
(in sorted name order) of each class, ``val_size`` split over classes proportionally.
"""

from __future__ import annotations

import io
import os
import pickle
import re
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from hkt.value_checks import number_list, optional, pos_int, spec
from hkt.data.common import (DOWNLOAD_LOCATION_KEYS, DOWNLOAD_SCHEMA, allocate, carve, carve_index, check_counts,
                             check_download_config, describe_source, location, new_tree_hash)
from hkt.data.parquet import Prepared, SplitData
from hkt.data.archives import iter_files
from hkt.data.sources import Source, resolve_source
from hkt.data.families import register
from hkt.errors import ConfigError, DataError

VOCAB = [str(v) for v in range(256)]
TOKENIZER = "grayscale pixel values 0..255, row-major; no padding id (mask by length)"
PAD = None
IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg")
_BATCH = re.compile(r"^(data_batch_[1-5]|test_batch)$")

PREPARE_SCHEMA: dict[str, Any] = {**DOWNLOAD_SCHEMA, "image_size": pos_int, "gray_weights": spec(number_list, n=3),
                                   "decode_workers": optional(pos_int)}
LOCATION_KEYS = DOWNLOAD_LOCATION_KEYS | {"decode_workers"}


def check_config(cfg: dict[str, Any]) -> None:
    check_download_config(cfg)
    size = cfg["prepare"]["image_size"]
    if cfg["max_length"] != size * size:
        raise ConfigError(f"task.max_length must be image_size**2 = {size * size} (one token per pixel), "
                          f"got {cfg['max_length']}")


def to_gray(rgb: np.ndarray, weights: tuple[float, float, float] = (0.2989, 0.5870, 0.1140)) -> np.ndarray:
    """uint8 RGB ``[..., 3]`` → uint8 gray ``[...]``, as ``tf.image.rgb_to_grayscale`` (float32 math)."""
    w = np.asarray(weights, dtype=np.float32)
    out = np.empty(rgb.shape[:-1], dtype=np.uint8)
    flat_in, flat_out = rgb.reshape(-1, 3), out.reshape(-1)
    step = 1 << 20  # pixels per chunk: bounded float32 temporaries
    for i in range(0, flat_in.shape[0], step):
        f = flat_in[i:i + step].astype(np.float32) * np.float32(1.0 / 255.0)
        y = f[:, 0] * w[0] + f[:, 1] * w[1] + f[:, 2] * w[2]
        flat_out[i:i + step] = np.clip(np.floor(y * np.float32(255.5)), 0, 255)
    return out


class _SafeUnpickler(pickle.Unpickler):
    """Unpickles the CIFAR batches (dicts, lists, bytes, numpy arrays) and nothing else."""

    ALLOWED = {
        ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
        ("numpy", "ndarray"), ("numpy", "dtype"),
        ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
        ("_codecs", "encode"),
    }

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self.ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"global {module}.{name} is not allowed in a CIFAR batch")


def load_batch(data: bytes, where: str) -> tuple[np.ndarray, np.ndarray]:
    """One pickled CIFAR-10 batch → (uint8 [N, 3072] channel-major, int64 labels [N])."""
    try:
        d = _SafeUnpickler(io.BytesIO(data), encoding="bytes").load()
    except Exception as exc:  # noqa: BLE001 - any unpickling failure is a bad file
        raise DataError(f"{where} is not a readable CIFAR-10 python batch: {exc}") from None
    if not isinstance(d, dict):
        raise DataError(f"{where}: expected a dict with b'data' and b'labels'")
    d = {k.decode() if isinstance(k, bytes) else k: v for k, v in d.items()}
    if "data" not in d or "labels" not in d:
        raise DataError(f"{where}: expected keys 'data' and 'labels' (CIFAR-10 python format), found "
                        f"{sorted(d)}")
    x = np.asarray(d["data"])
    y = np.asarray(d["labels"], dtype=np.int64)
    if x.dtype != np.uint8 or x.ndim != 2 or x.shape[1] != 3072 or x.shape[0] != y.shape[0]:
        raise DataError(f"{where}: expected data uint8 [N, 3072] and N labels, got {x.dtype} {x.shape} "
                        f"and {y.shape[0]} labels")
    return x, y


def decode_images(items: list[tuple[str, bytes]], size: int, where: str) -> np.ndarray:
    """Decode image files → uint8 RGB ``[N, size, size, 3]`` (runs in worker processes too)."""
    from PIL import Image, UnidentifiedImageError

    out = np.empty((len(items), size, size, 3), dtype=np.uint8)
    for i, (name, data) in enumerate(items):
        try:
            with Image.open(io.BytesIO(data)) as img:
                if img.size != (size, size):
                    raise DataError(f"{name} in {where} is {img.size[0]}x{img.size[1]}; expected {size}x{size}")
                out[i] = np.asarray(img if img.mode == "RGB" else img.convert("RGB"))
        except (UnidentifiedImageError, OSError, ValueError) as exc:
            raise DataError(f"cannot decode image {name} in {where}: {exc}") from None
    return out


class _Decoder:
    """Decodes images in chunks, in worker processes once there is more than one chunk."""

    CHUNK = 2500  # images per task: small fixtures never start a process pool

    def __init__(self, path: Path, size: int, workers: int) -> None:
        self.where, self.size, self.workers = str(path), size, workers
        self.items: list[tuple[str, bytes]] = []
        self.parts: list[Any] = []
        self.pool: Any = None
        self.count = 0

    def add(self, name: str, data: bytes) -> None:
        self.items.append((name, data))
        self.count += 1
        if len(self.items) >= self.CHUNK:
            self._flush(final=False)

    def _flush(self, final: bool) -> None:
        if not self.items:
            return
        if self.pool is None and self.workers > 1 and not final:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            self.pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"))
        if self.pool is not None:
            self.parts.append(self.pool.submit(decode_images, self.items, self.size, self.where))
        else:
            self.parts.append(decode_images(self.items, self.size, self.where))
        self.items = []

    def finish(self) -> np.ndarray:
        self._flush(final=True)
        arrays = [p if isinstance(p, np.ndarray) else p.result() for p in self.parts]
        return np.concatenate(arrays) if arrays else np.zeros((0, self.size, self.size, 3), np.uint8)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None


def _read(path: Path, classes: list[str], size: int, weights: tuple[float, float, float], tree_hash: Any,
          workers: int = 1) -> tuple[str, dict[str, tuple[list[str], np.ndarray, np.ndarray]]]:
    """Read either layout; return (layout, {split: (ids, gray uint8 [N, size*size], labels)})."""
    label_of = {c: i for i, c in enumerate(classes)}
    batches: dict[str, bytes] = {}
    roots: set[tuple[str, ...]] = set()
    unknown: set[str] = set()

    def select(rel: PurePosixPath) -> bool:
        parts = rel.parts
        if _BATCH.match(parts[-1]):
            return True
        return (len(parts) >= 3 and parts[-3] in ("train", "test")
                and parts[-1].lower().endswith(IMAGE_EXTENSIONS))

    rows: dict[str, list[tuple[str, int, int]]] = {"train": [], "test": []}  # (id, label, decode order)
    decoder = _Decoder(path, size, workers)
    try:
        for rel, data in iter_files(path, select, tree_hash=tree_hash):
            parts = rel.parts
            if _BATCH.match(parts[-1]):
                batches[parts[-1]] = data
                roots.add(("batches",) + parts[:-1])
                continue
            split, cls = parts[-3], parts[-2]
            if cls not in label_of:
                unknown.add(cls)
                continue
            roots.add(parts[:-3])
            rows[split].append((f"{split}/{cls}/{PurePosixPath(parts[-1]).stem}", label_of[cls], decoder.count))
            decoder.add(str(rel), data)
        rgb_all = decoder.finish()
    finally:
        decoder.close()

    if batches:
        need = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
        missing = [b for b in need if b not in batches]
        if missing:
            raise DataError(f"{path} has CIFAR-10 python batches but lacks {', '.join(missing)} (expected "
                            "cifar-10-batches-py/{data_batch_1..5,test_batch})")
        if len(roots) > 1:
            raise DataError(f"{path} holds several CIFAR-10 layouts; expected one")
        if size != 32:
            raise DataError("the official CIFAR-10 batches are 32x32; task.prepare.image_size must be 32")
        out = {}
        for split, names in (("train", need[:5]), ("test", need[5:])):
            xs, ys = zip(*(load_batch(batches[n], f"{n} in {path}") for n in names))
            x, y = np.concatenate(xs), np.concatenate(ys)
            if y.min() < 0 or y.max() >= len(classes):
                raise DataError(f"{split} labels in {path} are outside 0..{len(classes) - 1}")
            gray = to_gray(x.reshape(-1, 3, size * size).transpose(0, 2, 1), weights)
            out[split] = ([f"{split}/{i:05d}" for i in range(len(y))], gray, y)
        return "official python batches", out

    if not rows["train"] and not rows["test"]:
        hint = f" (found class folders {sorted(unknown)}, expected {classes})" if unknown else ""
        raise DataError(f"no CIFAR-10 data in {path}{hint}: expected cifar-10-batches-py/{{data_batch_1..5,"
                        f"test_batch}} or an image folder <root>/{{train,test}}/<class>/*.png|jpg")
    if unknown:
        raise DataError(f"{path} has image folders for unknown classes {sorted(unknown)}; expected the classes "
                        f"{classes} (task.prepare.classes)")
    if len(roots) > 1:
        shown = ", ".join("/".join(r) or "." for r in sorted(roots))
        raise DataError(f"{path} holds several image-folder layouts (roots: {shown}); expected one")
    out = {}
    for split in ("train", "test"):
        rs = rows[split]
        present = {lab for _, lab, _ in rs}
        if len(present) != len(classes):
            miss = [c for c in classes if label_of[c] not in present]
            raise DataError(f"no {split} images for class(es) {miss} in {path}: expected "
                            f"{split}/<class>/*.png|jpg for every class")
        rs.sort(key=lambda r: (r[1], r[0]))
        order = np.array([r[2] for r in rs], dtype=np.int64)
        gray = to_gray(rgb_all[order].reshape(len(rs), size * size, 3), weights)
        out[split] = ([r[0] for r in rs], gray, np.array([r[1] for r in rs], dtype=np.int64))
    return "image folder", out


def _split(ids: list[str], gray: np.ndarray, labels: np.ndarray) -> SplitData:
    n, t = gray.shape
    return SplitData(ids, gray.reshape(-1).astype(np.uint16), np.arange(n + 1, dtype=np.int64) * t, labels)


def alternative_source(meta: dict[str, Any]) -> str:
    """What a copy other than the official archive may differ in (hkt.data.source_warning)."""
    if (meta.get("source") or {}).get("layout") == "image folder":
        return ("its images are read from an image folder, not the official pickled arrays: such "
                "copies may be lossy (e.g. JPEG), so pixel values can differ from the official "
                "CIFAR-10's, and accuracy with them")
    return ("it has the official layout of pickled arrays, but its arrays are not checked against "
            "the official file's")


@register("cifar10")
def prepare(cfg: dict[str, Any], source: Path | None):

    p = cfg["prepare"]
    src: Source = resolve_source("cifar10", p, source)
    tree_hash = new_tree_hash(src)
    workers = p["decode_workers"] or min(4, os.cpu_count() or 1)
    layout, data = _read(src.path, p["classes"], p["image_size"], tuple(p["gray_weights"]), tree_hash, workers)
    check_counts("CIFAR-10", "images", {s: len(data[s][2]) for s in ("train", "test")}, p, src.path)
    ids, gray, labels = data["train"]
    n, nv = len(labels), p["val_size"]
    if layout.startswith("official"):
        is_val = np.arange(n) >= n - nv
        val_rule = f"the last {nv:,} of the {n:,} official training images (official order), as LRA's 90%/10% split"
    else:
        is_val = np.zeros(n, dtype=bool)
        per_class = allocate(np.bincount(labels, minlength=len(p["classes"])), nv)
        for c, k in enumerate(per_class):
            idx = np.flatnonzero(labels == c)
            is_val[idx[idx.size - k:]] = True
        val_rule = (f"the last files (sorted names) of each class, {nv:,} in all, split over classes in proportion "
                    "(an image folder has no global order; with files in official order within a class this "
                    "approximates LRA's last-10% split)")
    seed = p["shuffle_seed"]
    test = _split(*data["test"])
    splits = carve(_split(ids, gray, labels), test, carve_index(is_val, len(test), seed))
    desc = describe_source(src, p, tree_hash)
    desc["layout"] = layout
    w = p["gray_weights"]
    notes = [
        f"Source layout: {layout}.",
        f"Grayscale as LRA (tf.image.rgb_to_grayscale): float32 x/255, y = {w[0]} R + {w[1]} G + {w[2]} B, "
        "uint8 = floor(y * 255.5) saturated; tokens are the 1024 pixel values row-major.",
        "Pixel value 0 is a real token, not padding (pad_id is null): mask by length.",
        f"Validation: {val_rule}; train keeps the rest; the official test set is whole.",
        f"Rows of each split are in a seeded random order (shuffle_seed {seed}); ids are split/index in the "
        "official order, or split/class/file stem for image folders.",
    ]
    return Prepared(splits=splits, vocab=VOCAB, pad_id=PAD, tokenizer=TOKENIZER, class_names=list(p["classes"]),
                    source=desc, notes=notes, location=location(src))
