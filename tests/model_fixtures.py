"""Placeholder until the engine fixtures land."""
