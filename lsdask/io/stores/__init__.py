"""Data and models where clusters keep them: object stores through fsspec.

- :mod:`~lsdask.io.stores.location`: a path or URL (``s3://``, ``gs://``,
  ``abfs://``, ``memory://``, ``file://``) and its ``storage_options`` as one
  :class:`Location`; ``--storage-option KEY=VALUE`` pairs parsed;
- :mod:`~lsdask.io.stores.exclusive`: create an object only if it is absent,
  the one atomic step object stores offer (they have no rename and no
  ``flock``), and a probe that a store really refuses the second create;
- :mod:`~lsdask.io.stores.versions`: the commit protocol built on it, a log of
  numbered versions, each committed by creating its object exclusively, over
  immutable, uniquely named data objects (docs/storage.md);
- :mod:`~lsdask.io.stores.folders`: a local folder (a saved model, a
  checkpoint) committed as a version, and rebuilt from one.
"""

from lsdask.io.stores.exclusive import ConditionalWritesUnsupported, create_exclusive
from lsdask.io.stores.folders import download_folder, upload_folder
from lsdask.io.stores.location import (
    Location,
    is_store_url,
    open_location,
    parse_storage_options,
    storage_settings,
)
from lsdask.io.stores.versions import CommitConflict, Version, VersionLog

__all__ = [
    "CommitConflict",
    "ConditionalWritesUnsupported",
    "Location",
    "Version",
    "VersionLog",
    "create_exclusive",
    "download_folder",
    "is_store_url",
    "open_location",
    "parse_storage_options",
    "storage_settings",
    "upload_folder",
]
