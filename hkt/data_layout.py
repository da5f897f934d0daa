"""What a prepared-data directory holds (imported by the workflow's grid too: no heavy imports)."""

SPLITS = ("train", "val", "test")
#: A prepared data directory's Parquet metadata as a file of its own (the train split's ``hkt``
#: key): what a published results directory keeps of its data, for the provenance warnings.
DATA_METADATA = "metadata.json"
#: The per-example facts of a prepared task's val and test examples (:mod:`hkt.facts.examples`).
EXAMPLES = "examples.parquet"
MANIFEST = "manifest.json"  # written last by `hkt prepare`: each split file's SHA-256


def split_file(split: str) -> str:
    """The file name of a split: ``train.parquet`` …"""
    return f"{split}.parquet"


__all__ = ["SPLITS", "DATA_METADATA", "EXAMPLES", "MANIFEST", "split_file"]
