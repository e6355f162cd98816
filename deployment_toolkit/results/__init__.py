"""THE results module: the run folder and what it holds. The measured CSVs' columns (schema), their store
(store: atomic rewrite, typed read-back), who measured each row (identity), when, and whether a stored
row may be reused (ledger), and run.json (runinfo). perf writes through it; report, sizing and search read through
it. It imports nothing of perf, report, search or sizing."""
from .identity import RunIdentity, host_identity, input_data_digest
from .ledger import IDENTITY_COLUMN, MEASURED_AT_COLUMN, PROVENANCE_COLUMNS, IdentityMismatch, reconcile

__all__ = ["IDENTITY_COLUMN", "MEASURED_AT_COLUMN", "PROVENANCE_COLUMNS", "IdentityMismatch", "RunIdentity",
           "host_identity", "input_data_digest", "reconcile"]
