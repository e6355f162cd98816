"""The deployment plan's own error: one line, exit 2 (a UserError)."""
from __future__ import annotations

from ..errors import UserError


class DeploymentPlanError(UserError, RuntimeError):
    """The deployment cannot be planned: a model with no config under its SLO, a model that does not fit a replica,
    no layout within limits.max_replicas, a served pipeline that differs from its steps in-process."""


__all__ = ["DeploymentPlanError"]
