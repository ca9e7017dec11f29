"""Reading whileai rows of any shape into the canonical schema: reader, normalize, canonical, schema, features."""

__all__: list[str] = []  # its public names (the schema, Message) are the front door's
