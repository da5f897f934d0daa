"""The one registration mechanism for Python implementations (hkt.plugin_registry.Registry): a module
dropped into the registry's package is found with no list to edit; unknown names list the
registered ones; a module that fails to import is skipped with a warning naming its file."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from hkt.plugin_registry import PluginSkipped, Registry, UnknownName


def _package(tmp_path, monkeypatch, name: str, modules: dict[str, str]) -> None:
    pkg = tmp_path / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        f"from hkt.plugin_registry import Registry\nTHINGS = Registry('thing', {name!r})\n")
    for mod, body in modules.items():
        (pkg / f"{mod}.py").write_text(textwrap.dedent(body))
    monkeypatch.syspath_prepend(str(tmp_path))
    for m in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        monkeypatch.delitem(sys.modules, m)


def test_a_module_in_the_package_is_registered_on_first_lookup(tmp_path, monkeypatch):
    thing = """
        from {pkg} import THINGS

        @THINGS.register("{name}")
        class Thing:
            pass
        """
    _package(tmp_path, monkeypatch, "hkt_toy_pkg", {
        "alpha": thing.format(pkg="hkt_toy_pkg", name="alpha"),
        "beta": thing.format(pkg="hkt_toy_pkg", name="beta"),
        "helper": "VALUE = 1\n",                 # registers nothing: fine
        "_private": "raise RuntimeError('not imported')\n",
    })
    import hkt_toy_pkg

    assert "hkt_toy_pkg.alpha" not in sys.modules  # nothing imported before a lookup
    assert hkt_toy_pkg.THINGS.names() == ["alpha", "beta"]
    assert hkt_toy_pkg.THINGS["beta"].__module__ == "hkt_toy_pkg.beta"
    assert "hkt_toy_pkg._private" not in sys.modules


def test_unknown_names_list_the_registered_ones(tmp_path, monkeypatch):
    _package(tmp_path, monkeypatch, "hkt_toy_pkg2", {
        "one": "from hkt_toy_pkg2 import THINGS\nTHINGS.register('one')(len)\n"})
    import hkt_toy_pkg2

    with pytest.raises(UnknownName, match=r"unknown thing 'two'; registered: one$") as exc:
        hkt_toy_pkg2.THINGS["two"]
    assert isinstance(exc.value, KeyError) and isinstance(exc.value, ValueError)
    assert "two" not in hkt_toy_pkg2.THINGS and ["x"] not in hkt_toy_pkg2.THINGS  # unhashable


def test_a_broken_module_is_skipped_with_a_warning_and_the_others_still_register(tmp_path,
                                                                                 monkeypatch):
    thing = "from hkt_toy_pkg3 import THINGS\nTHINGS.register({name!r})(len)\n"
    _package(tmp_path, monkeypatch, "hkt_toy_pkg3", {
        "alpha": thing.format(name="alpha"),
        "broken": "def oops(:\n",                        # a syntax error
        "needs": "import hkt_no_such_optional_package\n",  # a missing dependency
        "zulu": thing.format(name="zulu"),               # after the broken ones
    })
    import hkt_toy_pkg3

    with pytest.warns(PluginSkipped) as caught:
        assert hkt_toy_pkg3.THINGS.names() == ["alpha", "zulu"]
    messages = sorted(str(w.message) for w in caught)
    assert len(messages) == 2
    assert messages[0].startswith(str(tmp_path / "hkt_toy_pkg3" / "broken.py") + ": skipped, "
                                  "every other thing still works: SyntaxError")
    assert "needs.py: skipped" in messages[1] and "ModuleNotFoundError" in messages[1]
    with pytest.raises(UnknownName, match=r"registered: alpha, zulu; .*broken\.py was skipped "
                                          r"\(SyntaxError"):
        hkt_toy_pkg3.THINGS["broken"]


def test_a_syntax_error_in_a_new_mixer_file_leaves_mha_and_s4d_working(tmp_path):
    """A fresh process, as a user's: a broken file sorted before every mixer module."""
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "aaa_broken_mixer.py").write_text("class Broken(:\n    pass\n")
    code = textwrap.dedent(f"""
        import hkt.mixers
        hkt.mixers.__path__.append({str(extra)!r})
        from hkt.mixers import build_mixer
        print(type(build_mixer("mha", d_model=8, n_heads=2)).__name__)
        print(type(build_mixer("s4d", d_model=8, n_heads=2)).__name__)
        """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["MultiHeadAttention", "S4DMixer"]
    assert f"{extra / 'aaa_broken_mixer.py'}: skipped, every other mixer still works: " \
           "SyntaxError" in r.stderr


def test_a_second_object_under_one_name_is_refused():
    reg = Registry("thing", "hkt_no_such_package")
    reg.register("a")(len)
    reg.register("a")(len)  # the same object again (a module imported twice): fine
    with pytest.raises(ValueError, match="thing 'a' is already registered"):
        reg.register("a")(abs)


def test_a_mixer_module_dropped_into_hkt_mixers_is_found(tmp_path, monkeypatch):
    """Adding a mixer is adding hkt/mixers/NAME.py: no import list to edit."""
    import hkt.mixers
    from hkt.mixers import MIXERS, build_mixer

    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "toy_mixer.py").write_text(textwrap.dedent("""
        import dataclasses
        from torch import nn
        from hkt.mixers.catalog import register

        @dataclasses.dataclass
        class ToyConfig:
            pass

        @register("toy_mixer")
        class ToyMixer(nn.Identity):
            config_class = ToyConfig

            def __init__(self, d_model, n_heads, causal=False, dropout=0.0, config=None):
                super().__init__()
        """))
    list(MIXERS)  # the real modules are registered first
    monkeypatch.setattr(MIXERS, "_entries", dict(MIXERS._entries))
    monkeypatch.setattr(MIXERS, "_discovered", False)
    monkeypatch.setattr(hkt.mixers, "__path__", [*hkt.mixers.__path__, str(extra)])
    monkeypatch.delitem(sys.modules, "hkt.mixers.toy_mixer", raising=False)
    try:
        assert "toy_mixer" in MIXERS
        assert type(build_mixer("toy_mixer", d_model=8, n_heads=2)).__name__ == "ToyMixer"
        assert list(MIXERS)[:3] == ["mha", "hkt", "conv"]  # their order is kept
    finally:
        sys.modules.pop("hkt.mixers.toy_mixer", None)


def test_a_family_module_dropped_into_hkt_data_families_is_found(tmp_path, monkeypatch):
    """Adding a data family is adding hkt/data/families/NAME.py: no table to edit."""
    import hkt.data.families
    from hkt.data.task_config import family_module
    from hkt.data.families import FAMILIES

    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "toy_family.py").write_text(textwrap.dedent("""
        from hkt.data.families import register

        PREPARE_SCHEMA = {}
        LOCATION_KEYS = frozenset()

        def check_config(cfg):
            pass

        @register("toy_family")
        def prepare(cfg, source):
            raise NotImplementedError
        """))
    list(FAMILIES)
    monkeypatch.setattr(FAMILIES, "_entries", dict(FAMILIES._entries))
    monkeypatch.setattr(FAMILIES, "_discovered", False)
    monkeypatch.setattr(hkt.data.families, "__path__", [*hkt.data.families.__path__, str(extra)])
    monkeypatch.delitem(sys.modules, "hkt.data.families.toy_family", raising=False)
    try:
        assert family_module("toy_family").__name__ == "hkt.data.families.toy_family"
        assert {"listops", "imdb", "cifar10", "toy_family"} == set(FAMILIES)
    finally:
        sys.modules.pop("hkt.data.families.toy_family", None)


def test_unknown_mixer_and_family_errors_name_the_choices():
    from hkt.mixers import build_mixer
    from hkt.data.task_config import family_module
    from hkt.errors import ConfigError, ConfigValueError
    from hkt.models.encoder import EncoderConfig

    with pytest.raises(ValueError, match=r"unknown mixer 'nope'; registered: conv, hkt, mha, s4d"):
        build_mixer("nope", d_model=8, n_heads=2)
    with pytest.raises(ConfigError, match=r"task.family must be one of cifar10, imdb, listops .*'nope'"):
        family_module("nope")
    with pytest.raises(ConfigValueError, match=r"known: conv, hkt, mha, s4d"):
        EncoderConfig(name="nope")


def test_a_mixer_without_its_config_class_is_refused():
    from torch import nn

    from hkt.mixers import register

    with pytest.raises(TypeError, match="needs a `config_class`"):
        register("no_config")(type("NoConfig", (nn.Module,), {}))


def test_the_registries_do_not_import_torch_where_it_is_not_needed():
    code = ("import sys, hkt.plugin_registry, hkt.data.families, hkt.data.task_config, hkt.cli.main;"
            "hkt.data.task_config.family_module('listops');"
            "assert 'torch' not in sys.modules, 'torch imported'")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
