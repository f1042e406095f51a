"""lcjax: Deep CFR for two-player Lost Cities, written in JAX."""

__version__ = "0.1.0"
