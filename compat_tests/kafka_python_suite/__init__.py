"""kafka-python's own SASL and SSL integration tests (from its PyPI sdist) against Strom."""
