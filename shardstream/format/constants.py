"""Format constants in one place: names and versions that packer and streamer must agree on."""

FORMAT_NAME = "shardstream"
FORMAT_VERSION = 1  # the index's shards as JSON rows: greppable, ~100 bytes and ~1 KB of parsing a shard
FORMAT_VERSION_COLUMNS = 2  # the shards in a binary columns file beside the index (see format/columns.py)
INDEX_NAME = "shardstream-index.json"
COLUMNS_SUFFIX = ".columns"  # an index "NAME.json" keeps its columns in "NAME.columns"
COLUMNS_NAME = "shardstream-index.columns"
COLUMNS_MAGIC = b"SSCOLUMN"
COLUMNS_THRESHOLD = 16_384  # indexes of more shards than this are written as version 2
OFFSETS_SUFFIX = ".offsets"
KEYS_NAME = "shardstream-keys"  # the sorted key file (+ ".idx", its block index) for lookup by key
SIDECARS_DIR = "sidecars"  # where `shardstream index --out` puts offsets when they cannot sit beside shards
INDEX_WORK_NAME = ".shardstream-index-work"
REJECTS_NAME = "shardstream-rejects.jsonl"
JOURNAL_NAME = ".shardstream-journal.jsonl"
WORK_DIR_NAME = ".shardstream-work"
SHARD_SUFFIX = ".tar"
DEFAULT_DIGITS = 6
BLOCK = 512
END_OF_ARCHIVE = 2 * BLOCK
# A fixed mtime keeps shards byte-identical across runs; 2001-09-09, so GNU tar does not call it implausible.
FIXED_MTIME = 1_000_000_000
SAMPLE_COLUMNS_SUFFIX = ".cols"  # a shard's per-sample columns (format/samplecols.py): "NAME.tar.cols"
SAMPLE_COLUMNS_MAGIC = b"SSSAMPLE"
