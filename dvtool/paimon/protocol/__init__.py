"""Paimon's table format without any IO: snapshots, schemas, manifests, partitions and how
a snapshot's entries add up to its live files and deletion vectors (the DV framings are in
`dvtool.deletion_vectors.paimon`)."""
