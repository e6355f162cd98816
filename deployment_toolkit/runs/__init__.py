"""THE run folder: who measured each row (identity), when, and whether a stored row may be reused."""
from .identity import RunIdentity, host_identity, input_data_digest
from .ledger import IDENTITY_COLUMN, MEASURED_AT_COLUMN, PROVENANCE_COLUMNS, IdentityMismatch, reconcile

__all__ = ["IDENTITY_COLUMN", "MEASURED_AT_COLUMN", "PROVENANCE_COLUMNS", "IdentityMismatch", "RunIdentity",
           "host_identity", "input_data_digest", "reconcile"]
