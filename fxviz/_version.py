"""fxviz's version, in the base layer: every layer may read it, the facade re-exports it."""

__version__ = "0.1.0"
