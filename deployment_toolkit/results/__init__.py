"""THE results module: the run folder and what it holds. The folder itself and its one output flag (run_folder:
run.json, identities, its row stores), the one typed row store (rows: schema, key, atomic rewrite, typed read-back),
the measured CSVs' columns and schemas (schema), the sweep's and the framework bench's stores (store, bench_store),
who measured each row (identity), when, and whether a stored row may be reused (ledger), and run.json (runinfo).
perf writes through it; report, sizing and search read through it. It imports nothing of perf, report, search or
sizing."""
from .identity import RunIdentity, host_identity, input_data_digest
from .ledger import IDENTITY_COLUMN, MEASURED_AT_COLUMN, PROVENANCE_COLUMNS, IdentityMismatch, reconcile
from .rows import RowSchema, RowStore
from .run_folder import RunFolder, add_result_path_argument

__all__ = ["IDENTITY_COLUMN", "MEASURED_AT_COLUMN", "PROVENANCE_COLUMNS", "IdentityMismatch", "RowSchema", "RowStore",
           "RunFolder", "RunIdentity", "add_result_path_argument", "host_identity", "input_data_digest", "reconcile"]
