"""Apache Iceberg: the protocol pieces dvtool reads and writes (Puffin deletion vectors)."""
