"""capaudit: matched-budget audits of caption surfaces for text-to-image training."""

__version__ = "0.1.0"
