"""The canonical row: every whileai row shape normalized into one schema (normalize, canonical, schema, features)."""

__all__: list[str] = []  # its public names (the schema, Message) are the front door's
