"""Aeron Archive (spec/archive.md): recordings of streams into segment files, a catalog, replay."""
