"""Decoding sample members by extension, after the shuffle buffer.

- ``sample.py``: ``SampleDecoder`` and ``DecodeOptions``: which members, to what, with which options.
- ``fields.py``: ``Fields``: which members a sample keeps, under which names, with alternatives.
- ``registry.py``: the decoder registry (extension -> function of bytes): images, audio, video, text, arrays.
- ``image.py``: image decoding with Pillow (draft mode, EXIF orientation) or libjpeg-turbo via torchcodec.
- ``clips.py``: video clips and audio windows of a long member, planned per (seed, epoch, key) (pure).
- ``clipdecode.py``: decoding just those clips and windows with torchcodec's seeking.
- ``gunzip.py``: ``.gz`` members inflated to at most a cap (``gunzip_max_bytes``).
"""
