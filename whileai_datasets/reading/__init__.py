"""Reading whileai files (JSONL, a JSON array, Parquet) into canonical rows: the reader, its workers, its errors."""

__all__: list[str] = []  # what a user reads with is load_dataset("whileai/export") and the Ray engine's read_whileai
