"""What the library raises: every error is a :class:`ChunkLabError` with a one-line message.

- :class:`InputError`: a document or question set that cannot be read (missing, corrupt, encrypted, a scan…);
- :class:`ParameterError`: a bad spec string, parameter or setting (also a ``ValueError``);
- :class:`ModelError`: a model that cannot be loaded or fails.
"""

from backend.errors import ChunkLabError, InputError, ModelError, ParameterError

__all__ = ["ChunkLabError", "InputError", "ModelError", "ParameterError"]
