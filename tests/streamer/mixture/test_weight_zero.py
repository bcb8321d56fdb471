"""``weight: 0`` leaves a source out of the run (issue 33, item 9): unopened, the rest as without it."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from streamer.mixture.mixture import Mixture
from tests.streamer.mixedset import pack_mixed

pytestmark = pytest.mark.filterwarnings("ignore:'set_vital' is deprecated")

OFF = r"source 'ocr' has weight 0: left out of this run \(remove it, or give it a weight > 0 to read it\)"


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    root = tmp_path_factory.mktemp("weight0")
    return {"llava": pack_mixed(root / "llava", n=30), "charts": pack_mixed(root / "charts", n=12)}


def _keys(mixture):
    return [(sample["__source__"], sample["__key__"]) for sample in mixture]


def _source(path, name, **share):
    return {"path": str(path), "name": name, "decode": False, **share}


def test_a_weight_0_source_is_not_opened_and_the_mixture_is_the_one_without_it(packed, tmp_path):
    nowhere = tmp_path / "not-packed-yet"  # the ablated source need not exist
    with pytest.warns(UserWarning, match=OFF) as caught:
        mix = Mixture(
            [
                _source(packed["llava"], "llava", weight=1.0),
                _source(nowhere, "ocr", weight=0),
                _source(packed["charts"], "charts", weight=2),
            ],
            seed=3,
            buffer_size=8,
        )
    assert [w.filename for w in caught if "weight 0" in str(w.message)] == [__file__]
    without = Mixture(
        [_source(packed["llava"], "llava", weight=1.0), _source(packed["charts"], "charts", weight=2)],
        seed=3,
        buffer_size=8,
    )
    assert mix.names == without.names == ["llava", "charts"]
    assert mix.identity() == without.identity()
    assert len(mix) == len(without)
    got = _keys(mix)
    assert got == _keys(without) and {source for source, _ in got} == {"llava", "charts"}


def test_weight_0_0_from_yaml_and_from_the_shell(packed, tmp_path):
    config = tmp_path / "mix.yaml"
    config.write_text(
        f"seed: 1\nsources:\n  - path: {packed['llava']}\n    name: llava\n    weight: 1\n"
        "  - path: data/ocr\n    name: ocr\n    weight: 0.0\n    image: torch\n"
    )
    with pytest.warns(UserWarning, match=OFF):
        mix = Mixture.from_yaml(config, buffer_size=4)
    expected = Mixture([_source(packed["llava"], "llava", weight=1)], seed=1, buffer_size=4)
    assert mix.identity() == expected.identity()
    assert [s["__key__"] for s in mix] == [s["__key__"] for s in expected]
    cli = Path(sys.executable).with_name("shardstream")
    run = subprocess.run(
        [str(cli), "stream", str(config), "--json", "--no-decode"], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["sources"] == {"llava": 30}
    # as a CLI says it: no file:line of the CLI's own code in front (the user's line is the shell's)
    assert "warning: source 'ocr' has weight 0: left out of this run" in run.stderr
    assert "stream.py" not in run.stderr and "UserWarning" not in run.stderr, run.stderr


def test_every_source_at_weight_0_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"every source has weight 0 \('ocr', 'charts'\)"):
        Mixture([_source(tmp_path / "a", "ocr", weight=0), _source(tmp_path / "b", "charts", weight=0.0)])


@pytest.mark.parametrize(
    ("share", "shown"),
    [
        ({"weight": -1}, "weight must be > 0, not -1"),
        ({"weight": math.nan}, "weight must be > 0, not nan"),
        ({"repeat": 0}, "repeat must be > 0, not 0"),
        ({"samples": 0}, "samples must be > 0, not 0"),
    ],
)
def test_a_negative_or_zero_amount_is_refused_with_the_way_to_turn_a_source_off(packed, share, shown):
    with pytest.raises(ValueError, match="weight: 0") as refused:
        Mixture([_source(packed["llava"], "llava", weight=1), _source(packed["charts"], "charts", **share)])
    assert shown in str(refused.value)


def test_a_left_out_source_is_still_checked_where_that_reads_nothing(packed, tmp_path):
    kept = _source(packed["llava"], "llava", weight=1)
    with pytest.raises(ValueError, match="unknown key 'wieght'"):
        Mixture([kept, {**_source(tmp_path / "x", "ocr", weight=0), "wieght": 1}])
    with pytest.raises(ValueError, match="give exactly one of weight, repeat or samples"):
        Mixture([kept, _source(tmp_path / "x", "ocr", weight=0, repeat=1)])
    with pytest.raises(ValueError, match="source 'ocr'"):
        Mixture([kept, {**_source(tmp_path / "x", "ocr", weight=0), "fields": 7}])
