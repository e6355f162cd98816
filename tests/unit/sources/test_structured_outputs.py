"""Structured outputs (dict, OrderedDict, Hugging Face ModelOutput, namedtuple, nested tuples) become named
tensors, the same way for the probe, the exporters and the framework reference."""
from collections import OrderedDict, namedtuple

import numpy as np
import pytest
import torch
from torch import nn

from deployment_toolkit.sources import SourceError
from deployment_toolkit.sources.outputs import (call, flat_module, flatten, leaves, left_out, left_out_line, path_name,
                                                paths_of, select)

Pair = namedtuple("Pair", "mean logvar")


def test_names_come_from_keys_and_output__i_only_where_there_is_none():
    t = torch.zeros(1)
    assert path_name(()) == "output__0" and path_name((1,)) == "output__1"
    assert path_name(("logits",)) == "logits" and path_name(("hidden_states", 2)) == "hidden_states__2"
    out = (t, {"out": t, "aux": None, "feats": [t, t]}, Pair(t, t))
    names = [leaf.name for leaf in leaves(out)]
    assert names == ["output__0", "output__1__out", "output__1__feats__0", "output__1__feats__1",
                     "output__2__mean", "output__2__logvar"]  # None dropped


def test_hugging_face_model_output_and_ordered_dict():
    from deployment_toolkit.compat import prepare_user_imports

    prepare_user_imports()
    from transformers.modeling_outputs import SequenceClassifierOutput

    logits = torch.randn(2, 3)
    out = SequenceClassifierOutput(logits=logits, hidden_states=(torch.zeros(2, 4), torch.ones(2, 4)))
    assert [leaf.name for leaf in leaves(out)] == ["logits", "hidden_states__0", "hidden_states__1"]
    assert flatten(out, ["logits"])[0] is logits  # by name, as a get_signature naming its keys
    od = OrderedDict(out=torch.ones(1, 2), aux=torch.zeros(1, 2))
    assert paths_of(od, ["out"]) == {"out": ["out"]}


def test_a_name_clashing_with_an_input_is_renamed():
    out = {"x": torch.zeros(1), "y": torch.zeros(1)}
    assert [leaf.name for leaf in leaves(out, avoid=["x"])] == ["x__out", "y"]


def test_outputs_selects_in_the_given_order_and_names_what_is_missing():
    found = leaves({"logits": torch.zeros(1), "hidden": torch.zeros(1)})
    assert [leaf.name for leaf in select(found, ["hidden", "logits"])] == ["hidden", "logits"]
    with pytest.raises(SourceError, match="--outputs names scores, which the model does not return; it returns "
                                          "logits, hidden"):
        select(found, ["scores"])


def test_a_cache_is_left_out_by_default_and_named_when_kept():
    class DynamicCache:
        pass

    found = leaves({"logits": torch.zeros(1), "past_key_values": DynamicCache(), "hidden": torch.ones(1)})
    assert [leaf.name for leaf in select(found)] == ["logits", "hidden"]  # no --outputs needed
    assert left_out(found, ["logits", "hidden"]) == {"past_key_values": "test_structured_outputs.DynamicCache"}
    with pytest.raises(SourceError, match=r"past_key_values \(a .*Cache\).*--outputs logits,hidden.*use_cache=False"):
        select(found, ["logits", "past_key_values"])  # asked for by name: still refused, with what to do
    assert [leaf.name for leaf in select(found, ["logits"])] == ["logits"]
    assert left_out_line({"past_key_values": "transformers.DynamicCache"}, ["logits"]) == (
        "left out past_key_values (a transformers.DynamicCache): not a tensor (a cache for generation), so not served; "
        "serving logits")
    assert left_out_line({"label": "str"}, ["probs"]) == "left out label (a str): not a tensor, so not served; serving probs"


def test_a_model_returning_only_a_cache_is_refused_in_one_line():
    class MambaCache:
        pass

    with pytest.raises(SourceError, match=r"^the model returns only cache_params \(a .*MambaCache\), no tensor: "
                                          r"nothing to serve \(a cache alone"):
        select(leaves({"cache_params": MambaCache(), "hidden_states": None}))


def test_positional_outputs_skip_a_cache_between_tensors():
    class Cache:
        pass

    out = (torch.zeros(2), Cache(), torch.ones(2))
    assert paths_of(out, ["a", "b"]) == {"a": [0], "b": [2]}
    assert flatten(out, ["a", "b"])[1].tolist() == [1.0, 1.0]


class KeywordModel(nn.Module):
    def forward(self, input_ids, attention_mask=None):
        return {"masked": input_ids * attention_mask, "ids": input_ids}


def test_inputs_go_by_keyword_when_forward_names_them_and_the_flat_module_returns_a_tuple():
    ids, mask = torch.tensor([[1, 2]]), torch.tensor([[1, 0]])
    out = call(KeywordModel(), [mask, ids], ["attention_mask", "input_ids"])  # the data's order, not forward's
    assert out["masked"].tolist() == [[1, 0]]
    flat = flat_module(KeywordModel(), ["attention_mask", "input_ids"], ["ids", "masked"],
                       {"ids": ["ids"], "masked": ["masked"]})
    got = flat(mask, ids)
    assert isinstance(got, tuple) and got[0].tolist() == [[1, 2]] and got[1].tolist() == [[1, 0]]
    traced = torch.jit.trace(flat, (mask, ids))
    assert np.array_equal(traced(mask, ids)[1].numpy(), got[1].numpy())


def test_a_namedtuple_output_is_named_by_its_fields():
    out = Pair(torch.zeros(2, 3), torch.ones(2, 3))
    assert [leaf.name for leaf in leaves(out)] == ["mean", "logvar"]
    assert paths_of(out, ["mean", "logvar"]) == {"mean": ["mean"], "logvar": ["logvar"]}
