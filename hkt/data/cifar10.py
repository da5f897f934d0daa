"""Old import path of :mod:`hkt.data.families.cifar10`: this name is that module itself."""

import sys

from hkt.data.families import cifar10 as _family

sys.modules[__name__] = _family
