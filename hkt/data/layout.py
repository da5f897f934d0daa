"""What a prepared-data directory holds (imported by the workflow's grid too: no heavy imports)."""

SPLITS = ("train", "val", "test")
MANIFEST = "manifest.json"  # written last by `hkt prepare`: each split file's SHA-256


def split_file(split: str) -> str:
    """The file name of a split: ``train.parquet`` …"""
    return f"{split}.parquet"


__all__ = ["SPLITS", "MANIFEST", "split_file"]
