"""The one storage layer of dvtool: every read, listing and write goes through `Storage`.

`Storage` wraps a filesystem and the table root: fsspec's filesystem for object stores and
memory://, and for a local root `LocalFiles`, the few fsspec methods dvtool calls written on
`os`, so that a command on a local table never imports fsspec (most of a small command's
start-up). Its contract, which the rest of dvtool relies on and tests check point by point
(the submodule that implements each part is named in brackets):

- Locations. The table root may be a local path (relative or absolute), a `file://` URI, or
  an `s3://` (also `s3a://`), `gs://`/`gcs://`, `abfs://`/`abfss://`/`az://` or `memory://`
  URI. Public methods take and return *locations*: absolute strings as a user writes them,
  an absolute POSIX path on local disk and `scheme://bucket/key` elsewhere (the scheme and
  bucket spelling of the root are kept). fsspec's own path form stays inside this package.
  [`locations`; the conversions to and from fsspec's paths are `table_storage`'s]
  `options` (the CLI's `--storage-option KEY=VALUE`) are resolved into the backend's
  keyword arguments: object_store's and delta-rs's keys (`AWS_REGION`, `AWS_ENDPOINT_URL`,
  `GOOGLE_SERVICE_ACCOUNT`, `AZURE_STORAGE_ACCOUNT_KEY`, ..., any letter case) by one
  documented table (README "Storage options"), the keys of delta-rs's own commit protocol
  accepted and ignored; otherwise the explicit parameters of the installed backend class's
  constructor, values converted by their type. Any other key, a value of the wrong type,
  two keys setting one argument differently, or a value the backend refuses when it is set
  up is a `UsageError` naming the key, never a crash; environment variables are read by the
  backends as usual. A local root with options opens fsspec's local filesystem, which takes
  them (`auto_mkdir`); without, `LocalFiles`, which answers as fsspec's does (entries,
  errors, ranges). A backend package that is not installed (s3fs, gcsfs, adlfs) is a
  `StorageError` saying what to install, an unknown scheme a `UsageError` saying which
  schemes work. [`backends`, `storage_options`, `storage_option_keys`, `local_files`]
- Path decoding. Paths in the Delta log are RFC 2396 URIs and are percent-decoded exactly
  once: a relative path is joined to the root, an absolute URI (`s3://...`) is kept as a
  location (`file:` URIs become local paths), an absolute POSIX path is kept. A literal `%25`
  in the log is the character `%` on storage, never decoded a second time.
  `encode_for_log` encodes like Delta Spark (Hadoop `Path.toUri`), so that
  `resolve(encode_for_log(p)) == join(p)`. [`locations`]
- Sorted listing. `list_dir` returns the files (not subdirectories) of a directory sorted by
  name, lexicographically, as the Delta log's zero-padded names require; a missing directory
  lists as empty. `start_after` keeps only names after it (filtered after listing: fsspec
  has no start-after listing, so object stores still list the whole prefix). `list_subdirs`
  names the subdirectories (not links) likewise, one delimited listing on object stores;
  `is_dir` tells whether a directory (on object stores: any object below it) is there.
  [`listing`]
- Ranged reads for DVs. `read_range` asks the backend for exactly the bytes wanted (a ranged
  GET on object stores, seek + read on disk), never the whole file, and a short read is a
  `StorageError` naming the location and the byte range. [`table_storage`]
- Errors. A missing file is `FileMissingError(location)`; any other backend failure
  (permissions, network, throttling) is a `StorageError` with the location and the
  backend's message on one line. Timeouts, resets, a busy store and 5xx replies are retried
  with backoff. [`failures`]
- Put-if-absent for commits. `put_if_absent` creates a file only if it does not exist,
  atomically: exactly one of several racing writers gets True and its bytes are the file's.
  Local disk: a temp file in the same directory (named `.tmp-<uuid>.dvtool`, which no
  reader takes for a Delta file), fsync, `os.link` to the final name (fails if it exists),
  fsync of the directory; the temp file is removed on every path. memory://: fsspec's
  create mode under a process-wide lock. s3, gs, abfs: fsspec's create mode, which the
  backends turn into a conditional PUT (`If-None-Match: *`, `ifGenerationMatch=0`,
  `overwrite=False`). Because a conditional PUT can succeed while its response is lost and
  be retried, a create that finds an object with exactly our bytes counts as ours. A backend
  that cannot do this (an old backend package, a local filesystem without hard links) is a
  `StorageError` saying the table cannot be committed to safely, unless the Storage was made
  with `unsafe_single_writer=True`: then an exists-check followed by a plain write is used,
  which is only correct while no other process writes the table. [`put_if_absent`, with
  `local_disk` for disk and `backends` for the backend versions that can do it]
- Whole-file writes. `write` (new, uniquely named files) and `write_atomic_replace` (files
  that are replaced, such as `_last_checkpoint`) never let a reader see half a file: temp
  file + fsync + `os.replace` on disk, a single PUT on object stores. A replaced local file
  loses its stale Hadoop checksum file (`.<name>.crc`). Local writes create
  missing parent directories. [`local_disk`]
- Idempotent delete. `delete` of a missing file is not an error; `delete_many` deletes in
  bulk where the backend can. [`table_storage`]
- Recursive listing (for vacuum). `walk` yields everything under a directory with paths
  relative to it (`TreeEntry`): on local disk files, directories and symbolic links, the
  links never followed (a link to a directory elsewhere is reported, not listed), and a
  directory is listed only when `descend(relative_dir)` allows it; on object stores only
  files (directories are implicit), those under a directory `descend` refuses left out. A
  missing directory walks as empty. `real_relative_to_root` is `relative_to_root` with
  symbolic links resolved on local disk (the root's own too): None for anything that is not
  really inside the root. `real_relative_paths()` gives the same answers for many locations
  at about one stat each (the root and each directory resolved once, then kept: a link
  changed later is not seen, so it is made anew for each check). `remove_empty_dir` removes
  an empty local directory (never the root, never a non-empty one, never a link); object
  stores have none to remove. [`listing`, `real_paths`, `local_disk`]
"""
