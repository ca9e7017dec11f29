"""Dataset builders (installed as ``whileai_datasets.builders``)."""
