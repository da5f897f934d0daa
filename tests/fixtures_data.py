"""Builders for the data tests: tiny archives in the official layouts, a local HTTP server, and
a reader of prepared splits.

Everything is built in temporary directories by the tests; nothing is downloaded.
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
CIFAR_CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


def shared_data_dir() -> Path:
    """``../shared/data`` beside the repository (or ``$HKT_SHARED_DATA``)."""
    env = os.environ.get("HKT_SHARED_DATA")
    return Path(env) if env else REPO.parent / "shared" / "data"


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def md5(path: Path) -> str:
    return hashlib.md5(Path(path).read_bytes()).hexdigest()


def read_rows(path: Path) -> dict[str, tuple[list[int], int, int]]:
    """A prepared split as ``{id: (tokens, label, length)}``, in file order."""
    t = pq.read_table(path)
    return dict(zip(t["id"].to_pylist(), zip(t["tokens"].to_pylist(), t["label"].to_pylist(),
                                              t["length"].to_pylist())))


def add_bytes(tf: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = 0
    tf.addfile(info, io.BytesIO(data))


# ---- IMDB --------------------------------------------------------------------------------

def imdb_reviews(n_per_folder: int = 6, seed: int = 0) -> dict[tuple[str, str], list[tuple[str, bytes]]]:
    """{(split, label): [(file name, bytes)]}: varied lengths, non-ASCII UTF-8, one very long review."""
    rng = np.random.default_rng(seed)
    words = ["great", "awful", "film", "plot", "<br /><br />", "Amélie", "naïve", "😀", "ok", "the", "and"]
    out = {}
    for split in ("train", "test"):
        for label in ("neg", "pos"):
            rows = []
            for i in range(n_per_folder):
                n_words = int(rng.integers(3, 40)) if i else 900  # the first review is longer than T
                text = " ".join(words[int(j)] for j in rng.integers(0, len(words), n_words))
                rating = int(rng.integers(1, 5)) if label == "neg" else int(rng.integers(7, 11))
                rows.append((f"{i * 3 + (split == 'test')}_{rating}.txt", f"{split} {label}: {text}".encode()))
            out[(split, label)] = rows
    return out


def write_imdb_tree(root: Path, reviews: dict) -> Path:
    """An extracted ``aclImdb/`` directory (with the files the official archive has besides reviews)."""
    base = root / "aclImdb"
    for (split, label), rows in reviews.items():
        d = base / split / label
        d.mkdir(parents=True, exist_ok=True)
        for name, data in rows:
            (d / name).write_bytes(data)
    (base / "README").write_text("fixture")
    (base / "imdb.vocab").write_text("the\nand\n")
    (base / "train" / "unsup").mkdir(parents=True, exist_ok=True)
    (base / "train" / "unsup" / "0_0.txt").write_bytes(b"unlabelled, must be ignored")
    (base / "train" / "urls_pos.txt").write_text("http://example.invalid\n")
    return base


def write_imdb_archive(path: Path, reviews: dict, extra: list[tarfile.TarInfo | tuple[str, bytes]] = ()) -> Path:
    """``aclImdb_v1.tar.gz``-layout archive; ``extra`` adds members (e.g. malicious ones)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tf:
        add_bytes(tf, "aclImdb/README", b"fixture")
        for (split, label), rows in sorted(reviews.items()):
            for name, data in rows:
                add_bytes(tf, f"aclImdb/{split}/{label}/{name}", data)
        add_bytes(tf, "aclImdb/train/unsup/0_0.txt", b"unlabelled, must be ignored")
        add_bytes(tf, "aclImdb/train/labeledBow.feat", b"0 0:1\n")
        for item in extra:
            if isinstance(item, tarfile.TarInfo):
                tf.addfile(item)
            else:
                add_bytes(tf, item[0], item[1])
    return path


# ---- CIFAR-10 ----------------------------------------------------------------------------

def cifar_images(n_train: int = 40, n_test: int = 20, seed: int = 0) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{split: (uint8 [N, 32, 32, 3] RGB, labels [N])}, every class present, pure colours included."""
    rng = np.random.default_rng(seed)
    out = {}
    for split, n in (("train", n_train), ("test", n_test)):
        x = rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8)
        x[0] = 0            # a black image: pixel value 0 must stay a real token
        x[1] = 255          # white
        x[2, :, :] = (255, 0, 0)  # pure red
        y = np.arange(n) % 10
        out[split] = (x, y.astype(np.int64))
    return out


def _batch_bytes(x: np.ndarray, y: np.ndarray, name: str) -> bytes:
    data = x.transpose(0, 3, 1, 2).reshape(len(x), 3072)  # channel-major rows, as the official batches
    return pickle.dumps({b"batch_label": name.encode(), b"labels": [int(v) for v in y], b"data": data,
                         b"filenames": [f"img_{i}.png".encode() for i in range(len(y))]}, protocol=2)


def write_cifar_python_archive(path: Path, images: dict, n_batches: int = 5) -> Path:
    """``cifar-10-python.tar.gz`` layout: ``cifar-10-batches-py/{data_batch_1..5,test_batch,batches.meta}``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    x, y = images["train"]
    parts = np.array_split(np.arange(len(y)), n_batches)
    with tarfile.open(path, "w:gz") as tf:
        for i, idx in enumerate(parts, start=1):
            add_bytes(tf, f"cifar-10-batches-py/data_batch_{i}", _batch_bytes(x[idx], y[idx], f"batch {i}"))
        xt, yt = images["test"]
        add_bytes(tf, "cifar-10-batches-py/test_batch", _batch_bytes(xt, yt, "test"))
        add_bytes(tf, "cifar-10-batches-py/batches.meta",
                  pickle.dumps({b"label_names": [c.encode() for c in CIFAR_CLASSES]}, protocol=2))
        add_bytes(tf, "cifar-10-batches-py/readme.html", b"<html></html>")
    return path


def write_cifar_folder(root: Path, images: dict, fmt: str = "png") -> Path:
    """An image-folder tree ``root/{train,test}/<class>/NNNN.png`` (lossless PNG by default)."""
    from PIL import Image

    for split, (x, y) in images.items():
        counters: dict[int, int] = {}
        for img, lab in zip(x, y):
            k = counters.get(int(lab), 0)
            counters[int(lab)] = k + 1
            d = root / split / CIFAR_CLASSES[int(lab)]
            d.mkdir(parents=True, exist_ok=True)
            Image.fromarray(img).save(d / f"{k:04d}.{fmt}")
    (root / "README.md").write_text("fixture")
    return root


def tar_directory(src: Path, archive: Path, arcname: str) -> Path:
    with tarfile.open(archive, "w:gz") as tf:
        tf.add(src, arcname=arcname)
    return archive


# ---- a local HTTP server -----------------------------------------------------------------

class FileServer:
    """Serves ``files`` (path → bytes) on 127.0.0.1. Knobs: ``honour_range`` (206 responses to
    ``Range``), ``truncate_at`` (announce the full length, send only this many bytes, close)."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = dict(files)
        self.honour_range = True
        self.truncate_at: int | None = None
        self.requests: list[dict[str, str | None]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep test output clean
                pass

            def do_GET(self):  # noqa: N802
                server.requests.append({"path": self.path, "range": self.headers.get("Range")})
                data = server.files.get(self.path)
                if data is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                start = 0
                rng = self.headers.get("Range")
                if rng and server.honour_range and rng.startswith("bytes="):
                    start = int(rng[6:].split("-")[0])
                    if start >= len(data):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(data)}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                body = data[start:]
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Connection", "close")
                self.end_headers()
                if server.truncate_at is not None and start < server.truncate_at < start + len(body):
                    self.wfile.write(body[: max(0, server.truncate_at - start)])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> "FileServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
