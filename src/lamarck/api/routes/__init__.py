"""One router per resource, mounted under ``/v1`` by ``lamarck.api.app``."""
