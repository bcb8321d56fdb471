"""Format constants in one place: names and versions that packer and streamer must agree on."""

FORMAT_NAME = "shardstream"
FORMAT_VERSION = 1
INDEX_NAME = "shardstream-index.json"
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
