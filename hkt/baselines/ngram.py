"""Hashed n-gram logistic regression: a bag of token n-grams and a linear classifier.

No neural network: where it beats the models, the task's labels are in its surface statistics.

    hkt baseline ngram --data DATA_DIR --out RUN_DIR [--orders 1 2 3] [--buckets 1048576]
        [--epochs 5] [--batch-size 256] [--lr 0.05] [--max-train N] [...]

Token n-grams (orders 1..3 by default) hashed into ``buckets`` features, weights
log(1 + count) normalised to unit length per example, multinomial logistic regression (an
``EmbeddingBag`` + bias trained with sparse Adam). The best epoch on validation is tested; its
validation accuracy per epoch is ``history.csv``; its predictions (the classifier's softmax) are
the best epoch's on validation and on the test. The arguments every baseline takes, and what
it writes: :mod:`hkt.baselines.run`.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from hkt.baselines import register
from hkt.baselines.run import Fit, Splits, add_run_arguments, answers, run_command
from hkt.data.parquet import SplitData
from hkt.errors import ConfigError
from hkt.predictions import PROB_DTYPE, SplitPredictions

_MIX = np.uint64(0x9E3779B97F4A7C15)  # golden-ratio multiplier of Fibonacci hashing
_STEP = np.uint64(1_000_003)

__all__ = ["hashed_ngrams", "fit", "add_arguments", "run"]


def hashed_ngrams(split: SplitData, orders: tuple[int, ...], bits: int,
                  chunk_tokens: int = 4_000_000) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per example, the distinct hashed n-grams and their weights (EmbeddingBag inputs).

    Returns ``(ids int64, offsets int64 (n+1), weights float32)``: example i's features are
    ``ids[offsets[i]:offsets[i+1]]`` with weights log(1 + count), scaled to unit L2 norm.
    """
    n = len(split)
    lengths = np.diff(split.offsets)
    out_ids, out_w, counts = [], [], np.zeros(n, dtype=np.int64)
    start = 0
    while start < n:  # chunks of examples bound the memory of the sort below
        limit = split.offsets[start] + chunk_tokens
        stop = max(start + 1, int(np.searchsorted(split.offsets, limit, side="right")) - 1)
        stop = min(stop, n)
        lo, hi = int(split.offsets[start]), int(split.offsets[stop])
        flat = split.flat[lo:hi].astype(np.uint64)
        rows = np.repeat(np.arange(stop - start, dtype=np.int64), lengths[start:stop])
        pos = np.arange(hi - lo, dtype=np.int64) - (split.offsets[start:stop] - lo)[rows]
        keys = []
        for order in orders:
            m = flat.size - order + 1
            if m <= 0:
                continue
            valid = pos[:m] <= (lengths[start:stop][rows[:m]] - order)
            h = np.full(m, np.uint64(order), dtype=np.uint64)
            for k in range(order):
                h = h * _STEP + flat[k: k + m]
            bucket = ((h * _MIX) >> np.uint64(64 - bits)).astype(np.int64)
            keys.append(rows[:m][valid] * (1 << bits) + bucket[valid])
        if keys:
            uniq, cnt = np.unique(np.concatenate(keys), return_counts=True)
            r = uniq >> bits
            out_ids.append(uniq & ((1 << bits) - 1))
            w = np.log1p(cnt.astype(np.float64))
            norm = np.sqrt(np.bincount(r, weights=w * w, minlength=stop - start))
            out_w.append((w / np.maximum(norm[r], 1e-12)).astype(np.float32))
            counts[start:stop] = np.bincount(r, minlength=stop - start)
        start = stop
    ids = np.concatenate(out_ids) if out_ids else np.zeros(0, dtype=np.int64)
    weights = np.concatenate(out_w) if out_w else np.zeros(0, dtype=np.float32)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return ids, offsets, weights


@register("ngram")
def fit(data: Splits, *, seed: int = 0, orders: tuple[int, ...] = (1, 2, 3), buckets: int = 1 << 20,
        epochs: int = 5, batch_size: int = 256, lr: float = 0.05) -> Fit:
    """Hashed n-gram multinomial logistic regression; the best validation epoch is tested."""
    bits = int(buckets).bit_length() - 1
    if buckets < 2 or (1 << bits) != buckets:
        raise ConfigError(f"--buckets must be a power of two >= 2, got {buckets}")
    if not orders or min(orders) < 1 or max(orders) > 8:
        raise ConfigError(f"--orders must be n-gram orders in 1..8, got {list(orders)}")
    res = _train(data.train, data.val, data.test, num_classes=data.num_classes,
                 orders=tuple(orders), bits=bits, epochs=epochs, batch_size=batch_size, lr=lr,
                 seed=seed)
    return Fit(**res, model={"orders": list(orders), "buckets": int(buckets),
                             "features": "log1p(count), unit L2 norm",
                             "classifier": "logistic regression"},
               train={"epochs": epochs, "batch_size": batch_size, "lr": lr,
                      "optimizer": "sparse adam"}, batch_size=batch_size)


def _train(train: SplitData, val: SplitData, test: SplitData, *, num_classes: int,
           orders: tuple[int, ...], bits: int, epochs: int, batch_size: int, lr: float,
           seed: int) -> dict[str, object]:
    """Train the classifier on ``train``'s hashed n-grams; the numbers of :class:`Fit`."""
    import torch  # keeps `hkt baseline --help` fast
    from torch import nn

    torch.manual_seed(seed)
    feats = {name: hashed_ngrams(s, orders, bits) for name, s in
             (("train", train), ("val", val), ("test", test))}
    emb = nn.EmbeddingBag(1 << bits, num_classes, mode="sum", sparse=True)
    nn.init.zeros_(emb.weight)
    bias = nn.Parameter(torch.zeros(num_classes))
    opt_sparse = torch.optim.SparseAdam([emb.weight], lr=lr)
    opt_dense = torch.optim.Adam([bias], lr=lr)

    def batch(name: str, idx: np.ndarray):
        ids, offs, w = feats[name]
        starts, ends = offs[idx], offs[idx + 1]
        lens = ends - starts
        take = np.concatenate([np.arange(s, e) for s, e in zip(starts, ends)]) if len(idx) else \
            np.zeros(0, dtype=np.int64)
        bag_offsets = np.concatenate([[0], np.cumsum(lens)[:-1]])
        return (torch.from_numpy(ids[take]), torch.from_numpy(bag_offsets.astype(np.int64)),
                torch.from_numpy(w[take]))

    def logits(name: str, idx: np.ndarray) -> torch.Tensor:
        i, o, w = batch(name, idx)
        return emb(i, o, per_sample_weights=w) + bias

    def predict(name: str, split: SplitData) -> SplitPredictions:
        """Every example's class and probabilities (its accuracy: the record's)."""
        with torch.no_grad():
            out = [logits(name, np.arange(s, min(len(split), s + 4096)))
                   for s in range(0, len(split), 4096)]
        z = torch.cat(out) if out else torch.zeros(0, num_classes)
        return answers(split, z.argmax(-1).numpy(), num_classes,
                       z.softmax(-1).numpy().astype(PROB_DTYPE))

    rng = np.random.default_rng(seed)
    labels = torch.from_numpy(np.array(train.labels, dtype=np.int64))
    best = {"val": -1.0, "state": None, "step": 0}
    history, step, t0 = [], 0, time.perf_counter()
    for _ in range(epochs):
        order = rng.permutation(len(train))
        for s in range(0, len(order), batch_size):
            idx = order[s: s + batch_size]
            loss = nn.functional.cross_entropy(logits("train", idx), labels[idx])
            opt_sparse.zero_grad()
            opt_dense.zero_grad()
            loss.backward()
            opt_sparse.step()
            opt_dense.step()
            step += 1
        val_pred = predict("val", val)
        history.append({"step": step, "val_acc": val_pred.accuracy})
        if val_pred.accuracy > best["val"]:
            best = {"val": val_pred.accuracy, "step": step, "predictions": val_pred,
                    "state": (emb.weight.detach().clone(), bias.detach().clone())}
    train_time = time.perf_counter() - t0
    with torch.no_grad():
        emb.weight.copy_(best["state"][0])
        bias.copy_(best["state"][1])
    return {"predictions": {"val": best["predictions"], "test": predict("test", test)},
            "n_params": int(emb.weight.numel() + bias.numel()), "steps": step,
            "best_step": int(best["step"]), "history": history, "train_time_s": train_time}


def _method_gone(value: str) -> str:
    raise argparse.ArgumentTypeError(
        f"is gone ({value!r}): the majority class is `hkt baseline majority`, and "
        "`hkt baseline ngram` is the n-gram model")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_arguments(parser)
    parser.add_argument("--orders", type=int, nargs="+", default=[1, 2, 3],
                        help="n-gram orders (default: 1 2 3)")
    parser.add_argument("--buckets", type=int, default=1 << 20,
                        help="hashed feature count, a power of two (default: 2^20)")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--lr", type=float, default=0.05)
    # `--method majority` ran the majority class here before it had its own module
    parser.add_argument("--method", type=_method_gone, default=argparse.SUPPRESS,
                        help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    return run_command("ngram", args)
