"""The library's version: semantic versioning of the ``chunklab`` surface (see CHANGELOG.md).

A major release may change or remove a name in ``chunklab.__all__``, a bridge's signature, or
what a spec string means; a minor release adds; a patch fixes. ``backend`` is the implementation
and carries no promise of its own. The number is pyproject.toml's (one source), read as
``backend.__version__`` reads it.
"""

from backend import __version__

__all__ = ["__version__"]
