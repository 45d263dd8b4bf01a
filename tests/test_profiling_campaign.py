"""Campaign files and set specs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from horus.errors import HorusInputError
from horus.profiling.campaign import ColocEntry, JobConfig, load_campaign, parse_set


def test_yaml_and_json_campaigns_parse(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(
        "solo:\n  - {model: resnet50, batch: 64, repeats: 2}\n  - {model: bert_base, batch: 8, precision: amp}\n"
        "colocate:\n  - {set: 'resnet50:64,bert_base:8:amp', repeats: 3}\n")
    campaign = load_campaign(tmp_path / "c.yaml")
    assert [e.job.config_id(0) for e in campaign.solo] == ["resnet50-b64-fp32-r0", "bert_base-b8-amp-r0"]
    assert campaign.solo[0].repeats == 2 and campaign.colocate[0].repeats == 3
    assert campaign.colocate[0].members[1] == JobConfig("bert_base", 8, "amp")
    (tmp_path / "c.json").write_text(json.dumps([{"model": "ncf", "batch": "512", "input_size": 2}]))
    assert load_campaign(tmp_path / "c.json").solo[0].job == JobConfig("ncf", 512, "fp32", 2)


@pytest.mark.parametrize("doc, fragment", [
    ([{"model": "x"}], "solo[0]"),
    ([{"model": "x", "batch": 0}], "batch"),
    ([{"model": "x", "batch": 2, "precision": "fp16"}], "precision"),
    ({"colocate": [{"set": "a:1"}]}, "at least two"),
    ({"colocate": [{"set": "a:1,b"}]}, "model:batch"),
    ({"other": []}, "mapping"),
])
def test_bad_campaign_names_the_entry(tmp_path: Path, doc: object, fragment: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(HorusInputError) as info:
        load_campaign(path)
    assert fragment in str(info.value) and str(path) in str(info.value)


def test_set_id_ignores_member_order() -> None:
    one = ColocEntry(parse_set("resnet50:64,bert_base:8"))
    two = ColocEntry(parse_set("bert_base:8,resnet50:64"))
    assert one.set_id == two.set_id == "bert_base-b8-fp32+resnet50-b64-fp32"
    assert ColocEntry(parse_set("a:1,a:1")).set_id == "a-b1-fp32+a-b1-fp32"
