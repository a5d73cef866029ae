"""lsdask's version, in a module that imports nothing (the kernel cache reads it
while ``lsdask/__init__.py`` is still importing)."""

__version__ = "0.1.0"
