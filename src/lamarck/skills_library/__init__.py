"""The skill library: verified Python functions with tests, provenance, versions and usage statistics.

``SkillLibrary`` (library.py) stores and retrieves skills; ``induce_skills`` (induction.py) proposes new ones from
successful episodes; plug-ins come from the ``lamarck.skills`` entry-point group (plugins.py).
"""

from lamarck.skills_library.skill import AddResult, SkillCandidate, SkillError, SkillView

__all__ = ["AddResult", "SkillCandidate", "SkillError", "SkillView"]
