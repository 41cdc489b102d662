"""Typer sub-apps of the ``lamarck`` command line, each mounted by ``lamarck.cli`` (e.g. ``lamarck skills``)."""
