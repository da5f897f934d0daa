"""Old import path of :mod:`hkt.data.families.imdb`: this name is that module itself."""

import sys

from hkt.data.families import imdb as _family

sys.modules[__name__] = _family
