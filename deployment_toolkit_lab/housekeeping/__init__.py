"""The committed runs' housekeeping: generated blocks copied into the Markdown that quotes them (`embed`), run
folders compacted to commit (`compact`), and the repository's and each run folder's size (`footprint`)."""
