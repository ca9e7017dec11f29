"""Dataset builders (installed as ``whileai_datasets.builders``)."""

__all__: list[str] = []  # the builder is reached through load_dataset("whileai/export"), its config through the front door
