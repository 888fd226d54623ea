"""The pure protocol core: actions, log replay, table features, the DV codec.

No IO, no fsspec/pyspark imports.
"""
