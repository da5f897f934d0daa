"""Where a record says its code came from (issue 37): the commit only where the running package
is this project's tracked, unmodified checkout; the package digest everywhere."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from hkt.provenance import code_digest, digest_of, git_state, package_dir

PYPROJECT = '[project]\nname = "{name}"\nversion = "0"\n'


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def _repo(root: Path, name: str = "hkt-bench", sub: str = ".") -> Path:
    """A committed git work tree at ``root`` with a copy of the hkt package at ``root/sub``."""
    (root / sub).mkdir(parents=True, exist_ok=True)
    shutil.copytree(package_dir(), root / sub / "hkt", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "pyproject.toml").write_text(PYPROJECT.format(name=name))
    (root / "config.yaml").write_text("lr: 1\n")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    return root / sub / "hkt"


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _repo(tmp_path_factory.mktemp("checkout"))


def test_a_clean_checkout_names_its_commit(checkout: Path) -> None:
    assert git_state(checkout) == (_git(checkout.parent, "rev-parse", "HEAD"), False)


def test_edits_outside_the_package_keep_the_commit_and_are_dirty(tmp_path: Path) -> None:
    pkg = _repo(tmp_path)
    (tmp_path / "config.yaml").write_text("lr: 2\n")
    assert git_state(pkg) == (_git(tmp_path, "rev-parse", "HEAD"), True)


def test_an_edited_or_untracked_package_file_names_no_commit(tmp_path: Path) -> None:
    pkg = _repo(tmp_path)
    (pkg / "new_module.py").write_text("X = 1\n")
    assert git_state(pkg) == (None, False)  # untracked code: the commit does not hold it
    (pkg / "new_module.py").unlink()
    with (pkg / "errors.py").open("a") as f:
        f.write("# edited\n")
    assert git_state(pkg) == (None, True)


def test_a_copy_inside_another_repository_names_no_foreign_commit(tmp_path: Path) -> None:
    assert git_state(_repo(tmp_path / "vendored", sub="third_party/hkt_copy")) == (None, None)
    assert git_state(_repo(tmp_path / "other", name="someone-elses-project")) == (None, None)


def test_a_copy_outside_git_has_no_git_state(tmp_path: Path) -> None:
    shutil.copytree(package_dir(), tmp_path / "hkt", ignore=shutil.ignore_patterns("__pycache__"))
    assert git_state(tmp_path / "hkt") == (None, None)


def test_the_code_digest_names_the_files_wherever_they_lie(checkout: Path, tmp_path: Path) -> None:
    copy = tmp_path / "site-packages" / "hkt"
    shutil.copytree(checkout, copy)
    (copy / "__pycache__").mkdir(exist_ok=True)
    (copy / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0cache")  # caches do not count
    assert digest_of(copy) == digest_of(checkout) == digest_of(package_dir()) == code_digest()
    with (copy / "errors.py").open("a") as f:
        f.write("# edited\n")
    assert digest_of(copy) != digest_of(checkout)


def test_records_carry_the_code_digest(tmp_path: Path) -> None:
    from hkt.run_record import make_record, validate_record

    rec = make_record(task="listops", model="mha", variant="main", seed=0, profile="smoke",
                      config={}, n_params=1, steps=1, best_step=1, val_accuracy=0.5,
                      test_accuracy=0.5, data_dir=tmp_path, data_checksums={})
    assert rec["code_digest"] == code_digest()
    with pytest.raises(Exception, match="code_digest"):
        validate_record({**rec, "code_digest": "not a digest"})
