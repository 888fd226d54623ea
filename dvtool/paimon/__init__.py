"""Apache Paimon tables: the file layout without IO (`protocol`), and the reading of a
table's snapshots, manifests and deletion files through dvtool's storage layer."""
