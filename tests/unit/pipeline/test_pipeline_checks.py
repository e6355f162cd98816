"""The pipeline's checks before anything is served (issue 36, items 1 and 5): every mismatch between a step and the
model, every bad raw sample, every malformed step file is one UserInputError line naming both sides (and exit 2
from the command). The steps run in-process against a toy manifest and a numpy stand-in for the model."""
from __future__ import annotations

import io
import textwrap
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from deployment_toolkit.errors import UserInputError
from deployment_toolkit.pipeline.plan import PipelineNames, plan_pipeline, prepare
from deployment_toolkit.pipeline.ports import Port
from deployment_toolkit.pipeline.stepfile import load_step
from deployment_toolkit.spec import Manifest, ModelSignature, TensorSpec

GOOD_PRE = """
    import io
    import numpy as np
    from PIL import Image

    INPUTS = {"image": "bytes"}

    def preprocess(image):
        pixels = [np.asarray(Image.open(io.BytesIO(bytes(b))).convert("RGB").resize((8, 8)), dtype=np.float32)
                  for b in image]
        return {"input__0": np.stack(pixels).transpose(0, 3, 1, 2) / 255.0}
"""
GOOD_POST = """
    import numpy as np

    def postprocess(output__0):
        best = output__0.argmax(axis=1)
        return {"label": np.array(["abcd"[i] for i in best], dtype=object)}
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def toy_manifest(folder: Path, inputs=(TensorSpec("input__0", (3, 8, 8)),), max_batch: int = 8) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    Manifest(model="toy", preset="small", family="test", task="classification", metric="accuracy", format="onnx",
             artifact="model.onnx",
             signature=ModelSignature(inputs=tuple(inputs), outputs=(TensorSpec("output__0", (4,)),)),
             max_batch_size=max_batch).save(folder)
    return folder


def predict(inputs):
    x = inputs["input__0"]
    return {"output__0": x.reshape(len(x), -1)[:, :4].astype(np.float32)}


def images(folder: Path, count: int = 2) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        buf = io.BytesIO()
        Image.new("RGB", (10 + i, 12), (40 * i, 90, 200)).save(buf, format="PNG")
        (folder / f"img_{i}.png").write_bytes(buf.getvalue())
    return folder


def plan(tmp_path: Path, pre_text: str | None = GOOD_PRE, post_text: str | None = GOOD_POST,
         manifest: Path | None = None, raw: Path | None = None):
    pre = load_step(write(tmp_path, "pre.py", pre_text), "preprocess") if pre_text else None
    post = load_step(write(tmp_path, "post.py", post_text), "postprocess") if post_text else None
    manifest = manifest or toy_manifest(tmp_path / "artifact")
    prepared = prepare(raw or images(tmp_path / "raw"), pre,
                       tuple(Port.from_spec(t) for t in Manifest.load(manifest).inputs))
    return plan_pipeline(PipelineNames("toy"), manifest, prepared, post, predict)


def test_a_good_pipeline_is_planned_with_its_reference_outputs(tmp_path):
    p = plan(tmp_path)
    assert [s.model for s in p.wiring.steps] == ["toy_preprocess", "toy", "toy_postprocess"]
    assert p.wiring.inputs == (Port("image", "bytes"),)
    assert p.wiring.outputs == (Port("label", "bytes"),)  # read from what postprocess returned
    assert p.step("toy_preprocess").outputs == (Port("input__0", "float32", (3, 8, 8)),)
    assert all(r.final["label"].dtype == object and r.final["label"][0] in (b"a", b"b", b"c", b"d") for r in p.runs)


@pytest.mark.parametrize("body, line", [
    ("return {'input__0': np.zeros((len(image), 3, 8, 8))}",
     "preprocess gives 'input__0' float64 [3,8,8]; the model takes 'input__0' float32 [3,8,8]: return it as "
     "float32 (.astype(np.float32))"),
    # two arrays for one input: not wired by position (one array alone is: test_wiring_by_position)
    ("return {'pixels': np.zeros((len(image), 3, 8, 8), np.float32), 'size': np.ones(len(image), np.int64)}",
     "preprocess gives 'pixels' float32 [3,8,8]; the model takes 'input__0' float32 [3,8,8]: return it as 'input__0'"),
    ("return {'input__0': np.zeros((len(image), 3, 16, 16), np.float32)}",
     "preprocess gives 'input__0' float32 [3,16,16]; the model takes 'input__0' float32 [3,8,8]: return it with "
     "per-sample shape [3,8,8]"),
    ("return {'pixels': np.zeros((len(image), 3, 224, 224))}",
     "preprocess gives 'pixels' float64 [3,224,224]; the model takes 'input__0' float32 [3,8,8]: return it as "
     "'input__0', as float32 (.astype(np.float32)), with per-sample shape [3,8,8]"),
])
def test_preprocess_outputs_that_do_not_match_the_model_inputs_are_one_line(tmp_path, body, line):
    pre = f"import numpy as np\ndef preprocess(image):\n    {body}\n"
    with pytest.raises(UserInputError) as err:
        plan(tmp_path, pre)
    assert str(err.value) == line


def test_a_model_input_preprocess_does_not_give_is_named(tmp_path):
    manifest = toy_manifest(tmp_path / "two", (TensorSpec("input__0", (3, 8, 8)), TensorSpec("mask", (8,), "int64")))
    line = (r"^the model takes 'mask' int64 \[8\], which preprocess does not give \(it gives 'input__0' float32 "
            r"\[3,8,8\]\): return it from preprocess too$")
    with pytest.raises(UserInputError, match=line):
        plan(tmp_path, manifest=manifest)


def test_postprocess_inputs_that_do_not_match_the_model_outputs_are_one_line(tmp_path):
    undeclared = "def postprocess(logits, extra):\n    return {'x': logits}\n"  # two unnamed: not by position
    with pytest.raises(UserInputError) as err:
        plan(tmp_path, post_text=undeclared)
    assert str(err.value) == ("postprocess takes 'logits', which the model does not give (it gives 'output__0' "
                              "float32 [4]): name the parameter 'output__0'")
    declared = "INPUTS = {'output__0': ('float32', [10])}\ndef postprocess(output__0):\n    return {'x': output__0}\n"
    with pytest.raises(UserInputError) as err:
        plan(tmp_path, post_text=declared)
    assert str(err.value) == ("postprocess takes 'output__0' float32 [10]; the model gives 'output__0' float32 [4]: "
                              "take it with per-sample shape [4]")
    renamed = "INPUTS = {'logits': ('float16', [4])}\ndef postprocess(logits):\n    return {'x': logits}\n"
    with pytest.raises(UserInputError) as err:
        plan(tmp_path, post_text=renamed)
    assert str(err.value) == ("postprocess takes 'logits' float16 [4]; the model gives 'output__0' float32 [4]: take "
                              "it as 'output__0' (the parameter's name), as float32")


def test_postprocess_may_take_a_preprocess_output_or_a_raw_input_by_name(tmp_path):
    post = ("import numpy as np\ndef postprocess(output__0, image):\n"
            "    return {'size': np.array([len(bytes(b)) for b in image], np.int64)}\n")
    p = plan(tmp_path, post_text=post)
    assert p.step("toy_postprocess").input_map == {"output__0": "model__output__0", "image": "image"}


def test_raw_text_that_is_not_utf8_names_the_file(tmp_path):
    raw = tmp_path / "texts"
    raw.mkdir()
    (raw / "ok.txt").write_text("fine", encoding="utf-8")
    (raw / "bad.txt").write_bytes(b"caf\xe9 latin-1")
    pre = "import numpy as np\nINPUTS = {'text': 'text'}\ndef preprocess(text):\n    return {}\n"
    with pytest.raises(UserInputError) as err:
        plan(tmp_path, pre, raw=raw)
    assert str(err.value) == (f"raw sample {raw / 'bad.txt'} is not valid UTF-8 (invalid continuation byte at byte "
                              "3), but preprocess takes 'text' as text: save it as UTF-8, or declare it \"bytes\"")


def test_an_image_that_does_not_decode_names_the_sample_and_the_reason(tmp_path):
    raw = images(tmp_path / "raw")
    (raw / "img_9.jpg").write_bytes(b"this is not a JPEG")
    with pytest.raises(UserInputError) as err:
        plan(tmp_path, raw=raw)
    line = str(err.value)
    assert line.startswith(f"preprocess (pre.py) on raw sample {raw / 'img_9.jpg'} failed: UnidentifiedImageError: "
                           "cannot identify image file"), line
    assert "\n" not in line


@pytest.mark.parametrize("text, line", [
    ("def preprocess(image):\n    return [image]\n",
     "preprocess (pre.py) on raw sample {sample} returned list, not a dict of named arrays: return {{name: array}}"),
    ("import numpy as np\ndef preprocess(image):\n    return {'input__0': np.zeros((3, 8, 8), np.float32)}\n",
     "preprocess (pre.py) on raw sample {sample} returned 3 row(s) of 'input__0' (shape [3, 8, 8]) for a batch of "
     "1: return one row per sample of the batch it is given (batch axis first), however many that is"),
    ("import numpy as np\nOUTPUTS = {'input__0': ('float32', [3, 8, 8])}\n"
     "def preprocess(image):\n    return {'input__0': np.zeros((len(image), 3, 8, 8))}\n",
     "preprocess returned 'input__0' float64 [3,8,8], but pre.py declares 'input__0' float32 [3,8,8]: return that "
     "dtype and shape, or fix OUTPUTS"),
])
def test_what_a_step_returns_is_checked(tmp_path, text, line):
    raw = images(tmp_path / "raw", 1)
    with pytest.raises(UserInputError) as err:
        plan(tmp_path, text, raw=raw)
    assert str(err.value) == line.format(sample=raw / "img_0.png")


@pytest.mark.parametrize("text, line", [
    ("def other(image):\n    return {}\n", "--preprocess {path} defines no function preprocess(...): add `def "
     "preprocess(name: np.ndarray, ...) -> dict[str, np.ndarray]` (one argument per input, batch axis first)"),
    ("INPUTS = {'image': 'complex64'}\ndef preprocess(image):\n    return {}\n",
     "pre.py: INPUTS['image']: dtype 'complex64' is not one Triton takes; use bytes, text or a numpy name such as "
     "float32, int64, uint8"),
    ("INPUTS = {'image': ('float32', [0])}\ndef preprocess(image):\n    return {}\n",
     "pre.py: INPUTS['image']: the shape [0] must list per-sample dims (positive ints, -1 for a size that varies; "
     "[] for one value per sample)"),
    ("INPUTS = {'picture': 'bytes'}\ndef preprocess(image):\n    return {}\n",
     "pre.py: INPUTS declares 'picture', which preprocess() does not take: its parameters are image"),
    ("FILES = ['missing.json']\ndef preprocess(image):\n    return {}\n",
     "pre.py: FILES names 'missing.json', which is not a file beside it in {folder}: list files relative to the "
     "step file's folder (no '..')"),
    ("def preprocess(**inputs):\n    return {}\n",
     "pre.py: preprocess() names no inputs (no parameters without a default): take one parameter per input, or "
     "declare INPUTS"),
])
def test_a_malformed_step_file_is_one_line(tmp_path, text, line):
    path = write(tmp_path, "pre.py", text)
    with pytest.raises(UserInputError) as err:
        load_step(path, "preprocess")
    assert str(err.value) == line.format(path=path, folder=tmp_path)


def test_raw_folders_that_do_not_fit_the_inputs_are_one_line(tmp_path):
    two = "import numpy as np\ndef preprocess(image, caption):\n    return {}\n"
    raw = images(tmp_path / "raw")
    with pytest.raises(UserInputError, match=r"is one file, but the pipeline takes 2 inputs \(image, caption\): put "
                                             r"each sample in a folder with one file per input"):
        plan(tmp_path, two, raw=raw)
    (raw / "sample").mkdir()
    with pytest.raises(UserInputError, match="mixes files and folders"):
        plan(tmp_path, two, raw=raw)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UserInputError, match="is empty"):
        plan(tmp_path, raw=empty)


def test_a_sample_per_folder_feeds_several_inputs(tmp_path):
    raw = tmp_path / "raw"
    for i in range(2):
        folder = images(raw / f"s{i}", 1)
        (folder / "img_0.png").rename(folder / "image.png")
        (folder / "caption.txt").write_text(f"caption {i}")
    pre = GOOD_PRE.replace("def preprocess(image):", "def preprocess(image, caption):").replace(
        'INPUTS = {"image": "bytes"}', 'INPUTS = {"image": "bytes", "caption": "text"}')
    p = plan(tmp_path, pre, raw=raw)
    assert p.wiring.inputs == (Port("image", "bytes"), Port("caption", "text"))
    assert p.runs[1].raw["caption"][0] == b"caption 1"


def test_an_unbatched_model_is_refused(tmp_path):
    with pytest.raises(UserInputError, match="max_batch_size 0.*--max-batch-size N"):
        plan(tmp_path, manifest=toy_manifest(tmp_path / "unbatched", max_batch=0))


def test_the_command_exits_2_with_one_line_before_converting(tmp_path, capsys):
    from deployment_toolkit.__main__ import main

    raw = tmp_path / "texts"
    raw.mkdir()
    (raw / "bad.txt").write_bytes(b"\xff\xfe")
    pre = write(tmp_path, "pre.py", "INPUTS = {'text': 'text'}\ndef preprocess(text):\n    return {}\n")
    with pytest.raises(SystemExit) as exc:
        main(["deploy-pipeline", "--model", "timm:resnet18", "--preprocess", str(pre), "--raw-data", str(raw),
              "--result-path", str(tmp_path / "run"), "--workspace", str(tmp_path / "ws")])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: raw sample {raw / 'bad.txt'} is not valid UTF-8 (invalid start byte at byte 0), but "
                   "preprocess takes 'text' as text: save it as UTF-8, or declare it \"bytes\""]
    assert not (tmp_path / "ws").exists()  # nothing was converted


def test_a_postprocess_alone_takes_the_models_inputs_as_npy_samples(tmp_path):
    raw = tmp_path / "arrays"
    raw.mkdir()
    for i in range(2):
        np.save(raw / f"s{i}.npy", np.full((3, 8, 8), i, np.float32))
    p = plan(tmp_path, pre_text=None, raw=raw)
    assert [s.model for s in p.wiring.steps] == ["toy", "toy_postprocess"]
    assert p.wiring.inputs == (Port("input__0", "float32", (3, 8, 8)),)
    assert p.step("toy").input_map == {"input__0": "input__0"}
    np.save(raw / "s2.npy", np.zeros((3, 8, 8), np.float64))
    with pytest.raises(UserInputError, match=r"s2.npy holds float64 \[3, 8, 8\]; the model takes 'input__0' float32 "
                                             r"\[3,8,8\]: save it with that dtype and shape"):
        plan(tmp_path, pre_text=None, raw=raw)


@pytest.mark.parametrize("fields, line", [
    ({}, "a pipeline needs --preprocess FILE, --postprocess FILE or both"),
    ({"preprocess": Path("p.py"), "reference": "onnx"}, "--verify-with must be one of framework, artifact, got 'onnx'"),
    ({"preprocess": Path("p.py"), "concurrencies": (0,)}, "--concurrency must be >= 1, got 0"),
    ({"preprocess": Path("p.py"), "speed_rounds": float("nan")}, "--speed-rounds must be >= 0, got nan"),
    ({"preprocess": Path("p.py"), "layout": "merged"}, "--layout must be one of ensemble, fused, got 'merged'"),
    ({"preprocess": Path("p.py"), "network": "native"},
     "--runtime native: the network then needs the NGC container's own backends, which the embedded server has not; "
     "add --write-only to write the repository for that server, or serve it here with --runtime python"),
])
def test_a_request_that_cannot_run_is_one_line(tmp_path, fields, line):
    from deployment_toolkit.pipeline import PipelineRequest
    from deployment_toolkit.repository.config import ConfigOptions

    if fields.get("network"):
        fields = {**fields, "network": ConfigOptions(model_name="m", runtime=fields["network"])}
    request = PipelineRequest(model="timm:resnet18", raw_data=tmp_path, result_path=tmp_path / "run", **fields)
    with pytest.raises(UserInputError) as err:
        request.check()
    assert str(err.value) == line


def test_a_module_imported_from_the_step_files_folder_must_travel_with_it(tmp_path):
    write(tmp_path, "labels_for_test_pipeline.py", "LABELS = ['a', 'b']\n")
    text = "import labels_for_test_pipeline\ndef postprocess(output__0):\n    return {}\n"
    with pytest.raises(UserInputError) as err:
        load_step(write(tmp_path, "post.py", text), "postprocess")
    assert str(err.value) == ("post.py imports labels_for_test_pipeline.py from its folder, which FILES does not list: "
                              "add FILES = ['labels_for_test_pipeline.py'] so it is copied beside the served step")
    listed = "FILES = ['labels_for_test_pipeline.py']\n" + text.replace("{}", "{'n': output__0}")
    assert load_step(write(tmp_path, "post2.py", listed), "postprocess").files == ("labels_for_test_pipeline.py",)


def test_the_batch_sizes_a_step_is_checked_at():
    from deployment_toolkit.pipeline.plan import batch_sizes

    assert batch_sizes(20, 8) == (2, 8) and batch_sizes(5, 8) == (2, 5) and batch_sizes(2, 8) == (2,)
    assert batch_sizes(1, 8) == () and batch_sizes(20, 1) == (2,)  # a batch of 2 whatever the max (Triton's call)


ONE_ROW = "for b in image[:1]]"
TWO_ROWS = "for b in image[:2]]"


@pytest.mark.parametrize("pre_text, post_text, count, line", [
    (GOOD_PRE.replace("for b in image]", ONE_ROW), GOOD_POST, 2,
     "preprocess (pre.py) on a batch of 2 raw samples (img_0.png, img_1.png) returned 1 row(s) of 'input__0' (shape "
     "[1, 3, 8, 8]) for a batch of 2: return one row per sample of the batch it is given (batch axis first), however "
     "many that is"),
    (GOOD_PRE.replace("for b in image]", TWO_ROWS), GOOD_POST, 3,  # right at 2, wrong at the largest batch
     "preprocess (pre.py) on a batch of 3 raw samples (img_0.png, img_1.png, img_2.png) returned 2 row(s) of "
     "'input__0' (shape [2, 3, 8, 8]) for a batch of 3: return one row per sample of the batch it is given (batch "
     "axis first), however many that is"),
    (GOOD_PRE, GOOD_POST.replace("output__0.argmax(axis=1)", "output__0[:1].argmax(axis=1)"), 2,
     "postprocess (post.py) on a batch of 2 samples' model outputs (img_0.png, img_1.png) returned 1 row(s) of "
     "'label' (shape [1]) for a batch of 2: return one row per sample of the batch it is given (batch axis first), "
     "however many that is"),
])
def test_a_step_that_ignores_the_batch_is_refused_naming_the_sizes(tmp_path, pre_text, post_text, count, line):
    """Each raw sample alone passes; Triton hands a step merged requests, so the check runs batches of them too."""
    with pytest.raises(UserInputError) as err:
        plan(tmp_path, pre_text, post_text, raw=images(tmp_path / "raw", count))
    assert str(err.value) == line


def test_sizes_a_batch_pads_to_vary_in_the_step_s_ports(tmp_path):
    """A preprocess that pads each batch to its longest text: alone every text is as long as itself, so only the
    batches show that the size varies."""
    raw = tmp_path / "texts"
    raw.mkdir()
    for name in ("a", "b"):
        (raw / f"{name}.txt").write_text("same size")
    pre = ("import numpy as np\nINPUTS = {'text': 'text'}\ndef preprocess(text):\n"
           "    n = len(text) + 3\n    return {'ids': np.ones((len(text), n), np.int64)}\n")
    prepared = prepare(raw, load_step(write(tmp_path, "pre.py", pre), "preprocess"))
    assert prepared.pre_outputs == (Port("ids", "int64", (-1,)),)
