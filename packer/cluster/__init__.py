"""Packing in parts: plan (cut the source) -> parts (one packer run each, anywhere) -> commit (renumber).

Any engine that can run ``run_part(outdir, n)`` once per part packs the same bytes: the local loop, Ray
tasks, a SLURM array (``shardstream pack plan|part|commit``) or a Spark ``foreach``.
"""

from .commit import commit
from .engines import pack_in_parts
from .part import run_part
from .plan import Plan, make_plan

__all__ = ["Plan", "commit", "make_plan", "pack_in_parts", "run_part"]
