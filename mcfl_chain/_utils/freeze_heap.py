"""Imported last in a forkserver's preload (:mod:`mcfl_chain._utils.forked`): one full
collection, then :func:`gc.freeze`. The forks inherit the preloaded heap frozen, so no
child's collection walks those objects, nor writes to their headers (which would copy
every page they sit on into each child)."""

import gc

gc.collect()
gc.freeze()
