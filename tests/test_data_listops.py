"""ListOps: generator labels (independent evaluator), bounds, determinism, splits, TSV reader."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from fixtures_data import read_rows
from hkt.data.families import listops
from hkt.data.task_config import load_task_config
from hkt.data.parquet import read_metadata
from hkt.data.prepare import prepare_task
from hkt.errors import ConfigError, DataError

SMALL = ["prepare.splits.train=300", "prepare.splits.val=60", "prepare.splits.test=60", "prepare.chunk_size=3000"]


def evaluate_text(expr: str) -> int:
    """Independent evaluator: parse the decoded prefix expression recursively."""
    toks = expr.split()

    def ev(i: int) -> tuple[int, int]:
        t = toks[i]
        if t.isdigit():
            return int(t), i + 1
        op, args, i = t, [], i + 1
        while toks[i] != "]":
            v, i = ev(i)
            args.append(v)
        assert len(args) >= 2
        if op == "[MIN":
            r = min(args)
        elif op == "[MAX":
            r = max(args)
        elif op == "[MED":
            r = int(statistics.median(args))  # LRA: int(np.median(...))
        elif op == "[SM":
            r = sum(args) % 10
        else:
            raise AssertionError(f"unknown operator {op}")
        return r, i + 1

    value, end = ev(0)
    assert end == len(toks), "trailing tokens"
    return value


def depth_of(expr: str) -> int:
    d = best = 0
    for t in expr.split():
        if t.startswith("["):
            d += 1
            best = max(best, d)
        elif t == "]":
            d -= 1
    return best


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("listops")
    prepare_task("listops", out, overrides=SMALL)
    return out


def test_labels_bounds_and_vocab(small):
    cfg = load_task_config("listops", SMALL)["prepare"]
    for split in ("train", "val", "test"):
        rows, meta = read_rows(small / f"{split}.parquet"), read_metadata(small / f"{split}.parquet")
        assert meta["vocab"] == ["<pad>", "[MIN", "[MAX", "[MED", "[SM", "]", *map(str, range(10))]
        assert meta["task"] == "listops" and meta["split"] == split and meta["vocab_size"] == 16
        assert meta["num_classes"] == 10 and meta["max_length"] == 512 and meta["pad_id"] == 0
        assert len(rows) == cfg["splits"][split]  # ids are unique (a duplicate would shrink the dict)
        for toks, label, _ in rows.values():
            expr = " ".join(meta["vocab"][t] for t in toks)
            assert 0 not in toks
            assert cfg["min_length"] < len(toks) < cfg["max_length"]
            assert toks[0] in (1, 2, 3, 4) and toks[-1] == 5  # the root is an operator
            assert depth_of(expr) <= cfg["max_depth"] - 1  # operators only at depth < max_depth
            assert evaluate_text(expr) == label


def test_no_overlap_between_splits(small):
    seqs = {s: {tuple(t) for t, _, _ in read_rows(small / f"{s}.parquet").values()} for s in ("train", "val", "test")}
    assert all(len(v) == n for v, n in zip(seqs.values(), (300, 60, 60)))  # no duplicates within
    assert not seqs["train"] & seqs["val"] and not seqs["train"] & seqs["test"] and not seqs["val"] & seqs["test"]


def test_deterministic_byte_identical(small, tmp_path):
    prepare_task("listops", tmp_path, overrides=SMALL)
    for s in ("train", "val", "test"):
        assert (tmp_path / f"{s}.parquet").read_bytes() == (small / f"{s}.parquet").read_bytes()
    other = tmp_path / "seed1"
    prepare_task("listops", other, overrides=[*SMALL, "prepare.seed=1"])
    assert (other / "test.parquet").read_bytes() != (small / "test.parquet").read_bytes()


def test_changing_train_size_keeps_val_and_test(small, tmp_path):
    prepare_task("listops", tmp_path, overrides=[*SMALL, "prepare.splits.train=100"])
    for s in ("val", "test"):
        assert list(read_rows(tmp_path / f"{s}.parquet").items()) == list(read_rows(small / f"{s}.parquet").items())


def test_generator_distribution_matches_lra_params():
    flat, offsets, labels, counters = listops.generate(
        2000, seed=3, min_length=0, max_length=10_000, max_depth=4, max_args=5, p_operator=0.5, chunk_size=500)
    nargs = []
    for i in range(2000):
        toks = flat[offsets[i]:offsets[i + 1]].tolist()
        expr = " ".join(listops.VOCAB[t] for t in toks)
        assert evaluate_text(expr) == labels[i]
        assert depth_of(expr) <= 3
        # argument counts of the root
        d, n = 0, 0
        for t in toks:
            if d == 1 and (t >= 6 or 1 <= t <= 4):
                n += 1
            d += 1 if 1 <= t <= 4 else -1 if t == 5 else 0
        nargs.append(n)
    assert set(nargs) == {2, 3, 4, 5}
    assert counters["duplicates"] > 0  # small trees repeat: duplicates were rejected
    assert len({flat[offsets[i]:offsets[i + 1]].tobytes() for i in range(2000)}) == 2000


def test_impossible_bounds_fail_clearly():
    with pytest.raises(DataError, match="exhausted"):
        listops.generate(10, seed=0, min_length=20, max_length=30, max_depth=2, max_args=3, p_operator=0.25,
                         chunk_size=100)


@pytest.mark.parametrize("override,key", [
    ("prepare.splits.train=0", "task.prepare.splits.train"),
    ("prepare.p_operator=1.5", "task.prepare.p_operator"),
    ("prepare.max_args=1", "task.prepare.max_args"),
    ("prepare.min_length=600", "task.prepare.min_length"),
    ("prepare.nonsense=1", "task.prepare.nonsense"),
    ("+prepare.nonsense=1", "task.prepare.nonsense"),
    ("prepare.seed=abc", "task.prepare.seed"),
])
def test_bad_config_names_the_key(override, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_task_config("listops", [override])


def _to_lra_string(toks: list[int]) -> str:
    """LRA's ``to_string`` of its tuple tree: [MAX 2 9] -> '( ( ( [MAX 2 ) 9 ) ] )'."""
    def build(i: int) -> tuple[str, int]:
        t = toks[i]
        if t >= 6:
            return str(t - 6), i + 1
        op, args, i = listops.VOCAB[t], [], i + 1
        while toks[i] != 5:
            a, i = build(i)
            args.append(a)
        s = f"( {op} {args[0]} )"
        for a in args[1:]:
            s = f"( {s} {a} )"
        return f"( {s} ] )", i + 1

    return build(0)[0]


def test_lra_tsv_reader(tmp_path, small, monkeypatch):
    val = list(read_rows(small / "val.parquet").values())  # (tokens, label, length)
    src = tmp_path / "lra"
    src.mkdir()
    for split in ("train", "val", "test"):
        rows = ["Source\tTarget"] + [f"{_to_lra_string(t)}\t{y}" for t, y, _ in val]
        (src / f"basic_{split}.tsv").write_text("\n".join(rows) + "\n")
    out = tmp_path / "out"
    prepare_task("listops_lra", out, source=src)
    assert list(read_rows(out / "test.parquet").values()) == val
    meta = read_metadata(out / "test.parquet")
    assert meta["source"]["kind"] == "lra_tsv" and meta["task_config"] == "listops_lra"

    # the same files from a mirror's listops/ folder, only when read_tsv is true
    monkeypatch.setenv("HKT_DATA_MIRROR", str(tmp_path))
    src.rename(tmp_path / "listops")
    prepare_task("listops_lra", tmp_path / "m", overrides=["prepare.read_tsv=true"])
    assert list(read_rows(tmp_path / "m" / "test.parquet").values()) == val
    monkeypatch.delenv("HKT_DATA_MIRROR")
    with pytest.raises(DataError, match="read_tsv is true but no TSV directory"):
        prepare_task("listops_lra", tmp_path / "m2", overrides=["prepare.read_tsv=true"])

    bad = tmp_path / "bad"
    bad.mkdir()
    for split in ("train", "val", "test"):
        (bad / f"basic_{split}.tsv").write_text("Source\tTarget\n( [MAX 2 ) 9 ) ]\t3\n")
    with pytest.raises(DataError, match=r"basic_train.tsv:2: target 3 but the expression evaluates to 9"):
        prepare_task("listops_lra", tmp_path / "o2", source=bad)
    (bad / "basic_train.tsv").write_text("Source\tTarget\n( [FIRST 2 ) 9 ) ]\t2\n")
    with pytest.raises(DataError, match=r"unknown or malformed token '\[FIRST'"):
        prepare_task("listops_lra", tmp_path / "o3", source=bad)
    (bad / "basic_train.tsv").write_text("Src\tTgt\n")
    with pytest.raises(DataError, match="Source"):
        prepare_task("listops_lra", tmp_path / "o4", source=bad)
    with pytest.raises(DataError, match="missing ListOps TSV file"):
        prepare_task("listops_lra", tmp_path / "o5", source=tmp_path / "out")


def test_data_card(small):
    card = (small / "README.md").read_text()
    for needle in ("## Splits", "| train | 300 |", "## Label balance", "## Length distribution", "min_length",
                   "SHA-256"):
        assert needle in card
