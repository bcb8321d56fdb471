"""The shard format, defined once and torch-free: keys, brace patterns, tar headers, index, offsets."""

from ..io.publish import write_atomic
from .columns import ShardColumns
from .constants import (
    FORMAT_NAME,
    FORMAT_VERSION,
    INDEX_NAME,
    OFFSETS_SUFFIX,
    REJECTS_NAME,
    SAMPLE_COLUMNS_SUFFIX,
    SHARD_SUFFIX,
)
from .index import DatasetIndex, ShardEntry
from .keys import check_key, member_name, normalize_extension, split_member_name
from .offsets import decode_offsets, encode_offsets, offsets_name
from .patterns import BracePattern, shard_digits, shard_name, shard_pattern
from .samplecols import decode_sample_columns, encode_sample_columns, sample_columns_name
from .tarheader import end_of_archive, member_header, member_size
from .tarread import iter_samples
from .verify import verify_dataset

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "INDEX_NAME",
    "OFFSETS_SUFFIX",
    "REJECTS_NAME",
    "SAMPLE_COLUMNS_SUFFIX",
    "SHARD_SUFFIX",
    "BracePattern",
    "DatasetIndex",
    "ShardColumns",
    "ShardEntry",
    "check_key",
    "decode_offsets",
    "decode_sample_columns",
    "encode_offsets",
    "encode_sample_columns",
    "end_of_archive",
    "iter_samples",
    "member_header",
    "member_name",
    "member_size",
    "normalize_extension",
    "offsets_name",
    "sample_columns_name",
    "shard_digits",
    "shard_name",
    "shard_pattern",
    "split_member_name",
    "verify_dataset",
    "write_atomic",
]
