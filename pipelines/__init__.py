"""The jobs behind the make targets: ingest, materialize (silver and gold), revert."""
