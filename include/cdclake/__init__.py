"""cdclake: change-data-capture streams into correct, validated Apache Iceberg tables."""

__version__ = "0.1.0"
