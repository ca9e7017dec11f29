"""The package version, in one place (the card and the front door read it)."""

__version__ = "0.1.0"
