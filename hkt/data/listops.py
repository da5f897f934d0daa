"""Old import path of :mod:`hkt.data.families.listops`: this name is that module itself."""

import sys

from hkt.data.families import listops as _family

sys.modules[__name__] = _family
