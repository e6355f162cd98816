"""The serving-overhead benchmark (`deployment-toolkit-lab bench-overhead`): the same runtime in-process and served
by Triton (`bench`), its settings (`options`), arithmetic (`stats`), paired single-client rounds (`single_client`),
private /dev/shm (`private_shm`) and report (`report`)."""
