"""GPU acceptance in one command (`make gpu-check`, triton/gpu_acceptance.py): plan, step runner, README."""
