"""What runs an artifact, and what the host can run: the numpy-in/numpy-out runtimes (ONNX Runtime, TorchScript,
TensorRT) and host probes. The bottom of the model side: it imports nothing of the toolkit, because
`artifact.py` is also copied beside a Python-backend model and runs there without it."""
