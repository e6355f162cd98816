"""Checkpoints as people have them, into the architectures they train: a torchvision MNASNet saved from a
DataParallel/DistributedDataParallel model (every key `module.`, its module versions in `_metadata`), a timm model
inside a PyTorch Lightning checkpoint (`state_dict` of `model.<name>`, epoch, optimizer and scheduler states,
callbacks, hyper-parameters), torch.compile's `_orig_mod.`, the usual wrapper keys and timm's EMA. The wrapper and
the prefix are found by matching the model's own keys and said in one line; what cannot load is one line, exit 2."""
import pathlib
import subprocess
import sys
from collections import OrderedDict
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

import deployment_toolkit  # noqa: F401  (the torchvision import shim)
from deployment_toolkit.sources import SourceError, create_model
from deployment_toolkit.sources.checkpoint import find_state_dict, load_checkpoint, read_state_dict

pytestmark = pytest.mark.slow  # real exports or subprocesses: `make test` runs it, `make test-unit` does not

ROOT = Path(__file__).resolve().parents[3]
MNASNET = "import torchvision\n\ndef get_model(num_classes: int = 10):\n" \
          "    return torchvision.models.mnasnet0_5(weights=None, num_classes=num_classes)\n"
TIMM = "import timm\n\ndef get_model(num_classes: int = 10):\n" \
       "    return timm.create_model('resnet18', pretrained=False, num_classes=num_classes)\n"
IMAGE = {"x": [3, 64, 64]}


def _model_py(tmp_path, text, name="model.py"):
    path = tmp_path / name
    path.write_text(text)
    return path


def _trained(factory, seed=3):
    """The architecture with weights unlike a fresh init (so loading them is observable), in eval mode."""
    torch.manual_seed(seed)
    model = factory()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return model.eval()


def _mnasnet():
    import torchvision

    return torchvision.models.mnasnet0_5(weights=None, num_classes=10)


def _resnet():
    import timm

    return timm.create_model("resnet18", pretrained=False, num_classes=10)


def _same(model, ref, x=None):
    x = torch.randn(2, 3, 64, 64) if x is None else x
    with torch.no_grad():
        torch.testing.assert_close(model(x), ref(x))


def lightning_checkpoint(net: torch.nn.Module) -> dict:
    """What Lightning 2.x writes for a LightningModule holding `self.model = net` and a weighted loss: the module's
    state dict (with `_metadata`) beside plain loop, callback, optimizer and scheduler states."""
    module = torch.nn.Module()
    module.model = net
    module.criterion = torch.nn.CrossEntropyLoss(weight=torch.ones(10))
    opt = torch.optim.AdamW(module.parameters(), lr=1e-3)
    module.model(torch.randn(2, 3, 64, 64)).sum().backward()
    opt.step()
    module.zero_grad()
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=10)
    monitor = "ModelCheckpoint{'monitor': 'val_loss', 'mode': 'min', 'every_n_train_steps': 0, " \
              "'every_n_epochs': 1, 'train_time_interval': None}"
    return {
        "epoch": 3, "global_step": 120, "pytorch-lightning_version": "2.4.0",
        "state_dict": module.state_dict(),
        "loops": {"fit_loop": {"state_dict": {}, "epoch_loop.state_dict": {"_batches_that_stepped": 120},
                               "epoch_progress": {"total": {"ready": 4, "completed": 3}, "current": {"ready": 4}}}},
        "callbacks": {monitor: {"monitor": "val_loss", "best_model_score": torch.tensor(0.31),
                                "best_model_path": "/runs/epoch=3.ckpt", "current_score": torch.tensor(0.31),
                                "dirpath": "/runs", "best_k_models": {"/runs/epoch=3.ckpt": torch.tensor(0.31)},
                                "kth_best_model_path": "/runs/epoch=3.ckpt", "kth_value": torch.tensor(0.31),
                                "last_model_path": ""}},
        "optimizer_states": [opt.state_dict()], "lr_schedulers": [sched.state_dict()],
        "hparams_name": "kwargs", "hyper_parameters": {"lr": 1e-3, "arch": "resnet18", "num_classes": 10,
                                                       "betas": (0.9, 0.999), "augment": True},
    }


# ------------------------------------------------------------------ what loads


def test_a_ddp_saved_mnasnet_loads_with_its_module_versions(tmp_path):
    ref = _trained(_mnasnet)
    torch.save(torch.nn.DataParallel(ref).state_dict(), tmp_path / "ddp.pt")  # DDP's keys: `module.` + versions
    found = find_state_dict(torch.load(tmp_path / "ddp.pt", weights_only=True), list(ref.state_dict()), "ddp.pt")
    assert found.prefix == "module." and found.where == ()
    assert found.tensors._metadata[""]["version"] == 2  # MNASNet's own version, re-rooted from `module`
    assert found.describe() == "checkpoint: stripped prefix 'module.' (314 tensors)"
    model = create_model(str(_model_py(tmp_path, MNASNET)), checkpoint_path=str(tmp_path / "ddp.pt"),
                         input_shapes=IMAGE)
    _same(model, ref)


def test_a_state_dict_without_versions_gets_the_models_own(tmp_path):
    """safetensors keeps no `_metadata`; MNASNet's version check then reads the model's own version."""
    ref = _trained(_mnasnet)
    save_file({f"module.{k}": v.contiguous() for k, v in ref.state_dict().items()}, tmp_path / "w.safetensors")
    model = _mnasnet()
    assert load_checkpoint(model, tmp_path / "w.safetensors").prefix == "module."
    _same(model.eval(), ref)


def test_a_lightning_checkpoint_of_a_timm_model(tmp_path):
    ref = _trained(_resnet)
    ckpt = lightning_checkpoint(ref)
    torch.save(ckpt, tmp_path / "epoch=3.ckpt")
    assert torch.load(tmp_path / "epoch=3.ckpt", weights_only=True)["epoch"] == 3  # what Lightning writes is safe
    model = _resnet()
    found = load_checkpoint(model, tmp_path / "epoch=3.ckpt", "resnet18")
    n = len(ref.state_dict())
    assert found.describe() == (f"checkpoint: took 'state_dict', stripped prefix 'model.', left out 1 tensor(s) "
                                f"outside it (criterion.weight) ({n} tensors)")
    _same(model.eval(), ref.eval())
    built = create_model(str(_model_py(tmp_path, TIMM)), checkpoint_path=str(tmp_path / "epoch=3.ckpt"),
                         input_shapes=IMAGE)
    _same(built, ref)


@pytest.mark.parametrize("wrap, said", [
    (lambda sd: {"model": sd, "optimizer": {}}, "took 'model'"),
    (lambda sd: {"state_dict": sd, "epoch": 7}, "took 'state_dict'"),
    (lambda sd: {"model_state_dict": sd, "optimizer_state_dict": {}, "loss": 0.1}, "took 'model_state_dict'"),
    (lambda sd: {"checkpoint": {"model": sd}}, "took 'checkpoint' > 'model'"),
    (lambda sd: sd, "checkpoint: stripped"),
])
@pytest.mark.parametrize("compiled_in", ["compile", "ddp+compile"])
def test_wrappers_and_torch_compile_prefixes(tmp_path, wrap, said, compiled_in):
    ref = _trained(_mnasnet)
    compiled = torch.compile(ref)  # nothing compiles until called: its state dict names `_orig_mod.`
    sd = (torch.nn.DataParallel(compiled) if compiled_in == "ddp+compile" else compiled).state_dict()
    torch.save(wrap(sd), tmp_path / "ckpt.pth")
    model = _mnasnet()
    found = load_checkpoint(model, tmp_path / "ckpt.pth")
    assert found.prefix == ("module._orig_mod." if compiled_in == "ddp+compile" else "_orig_mod.")
    assert said in found.describe()
    _same(model.eval(), ref)


def test_timm_ema_weights_are_taken_and_the_other_named(tmp_path):
    ref, ema = _trained(_mnasnet, seed=3), _trained(_mnasnet, seed=4)
    torch.save({"epoch": 9, "arch": "mnasnet0_5", "state_dict": ref.state_dict(),
                "state_dict_ema": {f"module.{k}": v for k, v in ema.state_dict().items()}}, tmp_path / "last.pth.tar")
    model = _mnasnet()
    found = load_checkpoint(model, tmp_path / "last.pth.tar")
    assert found.where == ("state_dict_ema",) and "'state_dict' would fit too" in found.describe()
    _same(model.eval(), ema)


def test_the_stripping_is_found_not_guessed(tmp_path):
    """A model whose own names start with `model.` keeps them; without a model the largest mapping is taken as is."""
    holder = torch.nn.Module()
    holder.model = torch.nn.Linear(3, 2)
    torch.save({"state_dict": holder.state_dict(), "aux": {"w": torch.ones(1)}}, tmp_path / "w.pt")
    assert load_checkpoint(holder, tmp_path / "w.pt").prefix == ""
    assert sorted(read_state_dict(tmp_path / "w.pt")) == ["model.bias", "model.weight"]


# ------------------------------------------------------------------ what does not, in one line


def test_the_models_own_loading_error_is_one_line_naming_the_checkpoint(tmp_path):
    sd = _trained(_mnasnet).state_dict()
    sd._metadata[""]["version"] = 7  # a version MNASNet's _load_from_state_dict refuses
    torch.save(sd, tmp_path / "future.pt")
    with pytest.raises(SourceError, match=r"checkpoint .*future\.pt: loading it into the model raised ValueError: "
                                          r"version should be set to 1 or 2 instead of 7"):
        load_checkpoint(_mnasnet(), tmp_path / "future.pt")


def test_hyper_parameters_holding_objects_are_refused_with_the_way_out(tmp_path):
    ckpt = {"state_dict": {f"model.{k}": v for k, v in _mnasnet().state_dict().items()}, "epoch": 1,
            "hyper_parameters": {"data_root": pathlib.PosixPath("/data")}}
    torch.save(ckpt, tmp_path / "objects.ckpt")
    with pytest.raises(SourceError) as err:
        load_checkpoint(_mnasnet(), tmp_path / "objects.ckpt")
    line = str(err.value)
    assert "\n" not in line and "weights_only=True refuses to load (it holds a pathlib.PosixPath object)" in line
    assert "save_file" in line and "objects.safetensors" in line


def test_a_checkpoint_without_tensors_names_what_it_holds(tmp_path):
    torch.save({"epoch": 3, "hyper_parameters": {"lr": 0.1}}, tmp_path / "meta.ckpt")
    with pytest.raises(SourceError, match="holds no state dict .*its top-level keys: epoch, hyper_parameters"):
        load_checkpoint(_mnasnet(), tmp_path / "meta.ckpt")


def test_keys_that_do_not_fit_say_where_they_were_read(tmp_path):
    sd = {f"model.{k}": v for k, v in _mnasnet().state_dict().items() if not k.startswith("classifier.")}
    torch.save({"state_dict": sd}, tmp_path / "headless.ckpt")
    with pytest.raises(SourceError, match=r"does not fit the model \(read 'state_dict', prefix 'model\.' stripped\): "
                                          r"missing keys \(2\): classifier\.1\.weight, classifier\.1\.bias"):
        load_checkpoint(_mnasnet(), tmp_path / "headless.ckpt")


# ------------------------------------------------------------------ end to end, as a user runs it


def _convert(*args):
    return subprocess.run([sys.executable, str(ROOT / "triton" / "convert_model.py"), *map(str, args)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)


def test_convert_model_takes_a_lightning_checkpoint_of_a_ddp_model(tmp_path):
    """Lightning around a DDP-wrapped MNASNet (`model.module.`), converted to ONNX and verified; the line once."""
    ref = _trained(_mnasnet)
    torch.save(lightning_checkpoint(torch.nn.DataParallel(ref)), tmp_path / "epoch=3.ckpt")
    model_py = _model_py(tmp_path, MNASNET)
    proc = _convert("--input-path", model_py, "--input-type", "pyt", "--checkpoint", tmp_path / "epoch=3.ckpt",
                    "--input-shape", "x=3,64,64", "--output-type", "onnx", "--output-path", tmp_path / "onnx")
    assert proc.returncode == 0 and "-> OK" in proc.stdout, proc.stdout + proc.stderr
    line = "checkpoint: took 'state_dict', stripped prefix 'model.module.', left out 1 tensor(s) outside it " \
           "(criterion.weight) (314 tensors); loading it into model.py:get_model ..."
    assert proc.stdout.count(line) == 1, proc.stdout

    import numpy as np
    import onnxruntime as ort

    x = np.random.default_rng(0).standard_normal((2, 3, 64, 64)).astype(np.float32)
    got = ort.InferenceSession(str(tmp_path / "onnx" / "model.onnx")).run(None, {"x": x})[0]
    with torch.no_grad():
        np.testing.assert_allclose(got, ref(torch.from_numpy(x)).numpy(), rtol=1e-4, atol=1e-5)

    sd = ref.state_dict()
    sd._metadata[""]["version"] = 7
    torch.save(sd, tmp_path / "future.pt")
    proc = _convert("--input-path", model_py, "--input-type", "pyt", "--checkpoint", tmp_path / "future.pt",
                    "--input-shape", "x=3,64,64", "--output-type", "onnx", "--output-path", tmp_path / "bad")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "future.pt: loading it into model.py:get_model raised " \
        "ValueError: version should be set to 1 or 2 instead of 7" in proc.stderr, proc.stderr
