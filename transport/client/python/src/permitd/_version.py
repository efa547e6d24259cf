"""The version of the permitd Python client."""

__version__ = "0.1.0"
