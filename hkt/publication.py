"""What makes a directory a publication (``docs/results/NAME``, written by
``scripts/publish_results.py``): its seal, ``SHA256SUMS``, the SHA-256 of every file its runs
wrote. A sealed publication changes only through that script (``--add``, ``--retable``,
``--manifest``), which checks it against its seal first; ``hkt aggregate`` and ``hkt train``
refuse to write into one (:func:`sealed_publication`)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["MANIFEST", "RETABLE", "sealed_publication"]

#: A publication's seal (sha256sum's format).
MANIFEST = "SHA256SUMS"
#: How a publication's tables, figures and summary are rebuilt from its records.
RETABLE = "python scripts/publish_results.py --retable"


def sealed_publication(path: str | Path) -> Path | None:
    """The sealed publication ``path`` lies in (``path`` itself or the nearest folder above it
    that holds a :data:`MANIFEST` beside its ``runs/``), or None."""
    here = Path(path).resolve()
    for folder in (here, *here.parents):
        if (folder / MANIFEST).is_file() and (folder / "runs").is_dir():
            return folder
    return None
