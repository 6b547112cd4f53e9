"""Aeron Cluster (issue 19): consensus module, elections, the replicated log, service containers and the cluster
client. Nothing is implemented here yet; the package exists so that the layer contracts in pyproject.toml (the
archive never imports the cluster) are checked from the start."""
