"""A network behind a preprocess needs nothing more (issue 46, items 2 and 4): a small BERT from its transformers config
class (random weights, 2 layers) in a model.py with get_model() and no get_signature, behind a preprocess that
tokenizes with transformers' BertTokenizerFast from a local vocab.txt and pads each batch to its longest text. Its
inputs (names, dtypes, the varying token axis, example shape, id range) come from the preprocess on raw texts of
different lengths; deploy-pipeline --write-only writes it, and served (ensemble, and fused) on the embedded server it
answers and verifies against in-process, a batch of texts of different lengths included. A preprocess that returns
one row whatever the batch is refused before anything is converted or served (exit 2, one line)."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest

from deployment_toolkit.__main__ import main
from deployment_toolkit.errors import UserInputError
from deployment_toolkit.pipeline import PipelineLayout, PipelineRequest, deploy_pipeline
from deployment_toolkit.pipeline.network_inputs import network_inputs
from deployment_toolkit.sources import parse_reference
from conftest import require_triton_tools

pytestmark = pytest.mark.integration

MODEL_PY = '''
"""A 2-layer BERT for sequence classification from its config class (random weights); no get_signature."""
from transformers import BertConfig, BertForSequenceClassification


def get_model():
    return BertForSequenceClassification(BertConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=64, num_labels=3))
'''
# transformers 5 takes the vocabulary file as `vocab` (a `vocab_file=` keyword is silently dropped: every token UNK)
PREPROCESS = '''
from pathlib import Path

import numpy as np
from transformers import BertTokenizerFast

FILES = ["vocab.txt"]
INPUTS = {"text": "text"}
_tokenizer = BertTokenizerFast(vocab=str(Path(__file__).resolve().parent / "vocab.txt"))


def preprocess(text):
    """Each batch padded to its longest text (the attention mask marks the padding)."""
    enc = _tokenizer([bytes(t).decode("utf-8") for t in text], padding="longest", return_tensors="np")
    return {"input_ids": enc["input_ids"].astype(np.int64), "attention_mask": enc["attention_mask"].astype(np.int64)}
'''
ONE_ROW = PREPROCESS.replace('for t in text]', 'for t in text[:1]]')  # ignores the batch: one row for any batch
WORDS = ("the service was quick and staff were friendly food cold waiter rude an average meal nothing special but "
         "fine i loved coffee cake wonderful").split()
TEXTS = {"a.txt": "the food was cold", "b.txt": "The service was quick and the staff were friendly, but the coffee "
         "was cold.", "c.txt": "wonderful", "d.txt": "an average meal, nothing special but fine (unseen: ☕ café)",
         "e.txt": "I loved the cake"}


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def brought(tmp_path_factory) -> Path:
    """What the user brings: model.py, preprocess.py with its vocab.txt, and raw texts of different lengths."""
    base = tmp_path_factory.mktemp("network_inputs")
    _write(base, "model.py", MODEL_PY)
    _write(base, "preprocess.py", PREPROCESS)
    _write(base, "one_row.py", ONE_ROW.replace('FILES = ["vocab.txt"]', 'FILES = ["vocab.txt"]  # one row'))
    _write(base, "vocab.txt", "\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    (base / "texts").mkdir()
    for name, text in TEXTS.items():
        _write(base / "texts", name, text)
    return base


def _argv(base: Path, out: Path, *extra: str, preprocess: str = "preprocess.py") -> list[str]:
    return ["deploy-pipeline", "--input-path", str(base / "model.py"), "--preprocess", str(base / preprocess),
            "--raw-data", str(base / "texts"), "--name", "textnet", "--workspace", str(base / "ws"),
            "--result-path", str(out), *extra]


def test_the_preprocess_gives_the_network_its_inputs_and_a_folder_of_them(brought, tmp_path):
    inputs = network_inputs(brought / "preprocess.py", brought / "texts", tmp_path / "inputs")
    specs = {t.name: t for t in inputs.specs}
    assert list(specs) == ["input_ids", "attention_mask"] and {t.dtype for t in specs.values()} == {"int64"}
    assert specs["input_ids"].shape == (-1,) and specs["input_ids"].example_shape == (6,)  # [CLS] 4 words [SEP]
    assert specs["attention_mask"].value_range == (1, 2)  # one text alone is never padded
    low, high = specs["input_ids"].value_range
    assert low == 1 and 5 < high <= 5 + len(WORDS)  # real ids: the vocabulary was read
    files = sorted(inputs.folder.iterdir())
    assert [f.name for f in files] == [f"{n}.npz" for n in TEXTS] and inputs.samples == len(TEXTS)
    lengths = {f.name: np.load(f)["input_ids"].shape for f in files}
    assert len(set(lengths.values())) > 2 and all(len(s) == 1 for s in lengths.values())  # per sample, no batch axis
    assert inputs.data.data_dir == str(inputs.folder)
    # a model.py without get_signature is fed them as its inputs
    source = inputs.source(parse_reference(str(brought / "model.py")))
    assert source.input_shapes["input_ids"] == {"shape": [-1], "dtype": "int64", "example_shape": [6],
                                                "value_range": [low, high]}


def test_a_get_signature_is_completed_from_the_preprocess_and_checked_against_it(brought, tmp_path):
    inputs = network_inputs(brought / "preprocess.py", brought / "texts", tmp_path / "inputs")
    dynamic = tmp_path / "dynamic.py"
    dynamic.write_text(MODEL_PY + textwrap.dedent('''
        def get_signature():
            return {"inputs": [{"name": "input_ids", "shape": [-1], "dtype": "int64"},
                               {"name": "attention_mask", "shape": [-1], "dtype": "int64"}],
                    "outputs": [{"name": "logits", "shape": [3], "dtype": "float32"}]}
        '''))
    from deployment_toolkit.sources import resolve

    resolved = resolve(inputs.source(parse_reference(str(dynamic))))  # no example_shape: taken from the texts
    assert [t.example_shape for t in resolved.signature.inputs] == [(6,), (6,)]
    fixed = tmp_path / "fixed.py"
    fixed.write_text(dynamic.read_text().replace('"shape": [-1], "dtype": "int64"}]', '"shape": [32], "dtype": '
                                                 '"int64"}]'))
    with pytest.raises(UserInputError) as err:
        inputs.source(parse_reference(str(fixed)))
    assert str(err.value) == ("fixed.py:get_signature declares input 'attention_mask' as int64 [32], but "
                              "preprocess.py gives int64 [-1] on the raw samples (-1: the size varies): make them "
                              "agree, or leave the inputs out of get_signature (they are read from preprocess)")


def test_a_network_without_get_signature_is_written_by_deploy_pipeline(brought, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(_argv(brought, tmp_path / "run", "--write-only"))
    assert exc.value.code == 0, capsys.readouterr().err
    repo = tmp_path / "run" / "model_repository"
    assert sorted(p.name for p in repo.iterdir()) == ["textnet", "textnet_pipeline", "textnet_preprocess"]
    assert (repo / "textnet_preprocess" / "1" / "vocab.txt").is_file()
    [artifact] = [p for p in (brought / "ws").iterdir() if (p / "manifest.json").is_file()]
    manifest = json.loads((artifact / "manifest.json").read_text())
    assert [(t["name"], t["shape"]) for t in manifest["signature"]["inputs"]] == [("input_ids", [-1]),
                                                                               ("attention_mask", [-1])]
    verification = manifest["verification"]
    assert verification["passed"] and verification["samples_checked"] == len(TEXTS)  # on the real token lengths
    assert "dims: -1" in (repo / "textnet" / "config.pbtxt").read_text()


def test_a_preprocess_that_ignores_the_batch_is_refused_before_anything_runs(brought, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(_argv(brought, tmp_path / "run", "--write-only", "--workspace", str(tmp_path / "ws"),
                   preprocess="one_row.py"))
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2
    assert err.count("\n") == 0 and "Traceback" not in err, err
    assert ("preprocess (one_row.py) on a batch of 2 raw samples (a.txt, b.txt) returned 1 row(s) of 'input_ids' "
            "(shape [1, 6]) for a batch of 2: return one row per sample of the batch it is given") in err, err
    assert not (tmp_path / "ws").exists() and not (tmp_path / "run").exists()  # nothing converted, nothing written


def _served_request(base: Path, out: Path, **fields) -> PipelineRequest:
    return PipelineRequest(model=str(base / "model.py"), raw_data=base / "texts", result_path=out,
                           preprocess=base / "preprocess.py", name="textnet", workspace=base / "ws",
                           concurrencies=(), **fields)


@pytest.mark.parametrize("layout", [PipelineLayout.ENSEMBLE, PipelineLayout.FUSED])
def test_the_pipeline_is_served_and_answers_as_in_process(brought, tmp_path, layout):
    """The preprocess (importing transformers) loads in the embedded server's Python-backend stub; every text is
    verified against in-process, then two texts of different lengths in one request (padded to the longer one)
    answer as each does alone."""
    require_triton_tools()
    import deployment_toolkit as dt

    run = deploy_pipeline(_served_request(brought, tmp_path / "run", layout=layout))
    assert run.passed, run.verification.summary()
    assert len({c.sample for c in run.verification.checks}) == len(TEXTS)
    alone = {r.name: r.final["logits"][0] for r in run.plan.runs}
    with dt.serve(run.written.repository) as server, dt.connect(server.grpc_url) as client:
        server.require_models([run.written.ensemble])
        texts = np.array([[TEXTS["b.txt"].encode()], [TEXTS["c.txt"].encode()]], dtype=object)
        served = client.infer(run.written.ensemble, {"text": texts}, ["logits"])["logits"]
    assert served.shape == (2, 3)
    np.testing.assert_allclose(served, np.stack([alone["b.txt"], alone["c.txt"]]), atol=1e-4, rtol=1e-4)
