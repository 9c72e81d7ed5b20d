from .core import EqualityHashKey, unzip
from .parallel import fold
