"""Reading whileai rows of any shape into the canonical schema: reader, normalize, canonical, schema, features."""
