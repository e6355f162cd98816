"""A corpus of real architectures from timm, torchvision, transformers and torch, built with random weights."""
