"""A deployment of several models (issue 36): the typed deployment file, the choice of which models share a replica,
traffic that mixes every model's schedule at once, and the plan that composes them."""
