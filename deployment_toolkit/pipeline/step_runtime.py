"""How a pre- or post-processing function is called on a batch: the one code that the toolkit runs in-process
(checks, verification, the speed benchmark) and that Triton's Python backend runs (this file is copied beside the
generated model.py as `step_runtime.py`), so both call the user's function the same way. Imports only numpy.

The function takes named arrays (keyword arguments, batch axis first; strings as object arrays of `bytes`) and
returns a dict of named arrays with the same batch axis; str and bytes values become object arrays of UTF-8 bytes.
Requests whose per-sample shapes agree are concatenated into one call and split back; others are called one by one.
"""
import numpy as np


class StepError(Exception):
    """The user's function failed or returned something that is not a dict of batched arrays (one line)."""


def _first_line(err):
    text = (str(err).strip().splitlines() or [""])[0][:200]
    tb, where = err.__traceback__, ""
    while tb is not None:
        where = " (%s:%d)" % (tb.tb_frame.f_code.co_filename.rsplit("/", 1)[-1], tb.tb_lineno)
        tb = tb.tb_next
    return "%s: %s%s" % (type(err).__name__, text, where) if text else type(err).__name__ + where


def as_strings(value):
    """An object array of bytes (str encoded as UTF-8), of the same shape."""
    arr = np.asarray(value, dtype=object)
    out = np.empty(arr.shape, dtype=object)
    for index, item in np.ndenumerate(arr):
        out[index] = item.encode("utf-8") if isinstance(item, str) else bytes(item)
    return out


def normalise(name, value, batch, what):
    """One returned value as an array with the batch axis; strings as object arrays of bytes."""
    arr = np.asarray(value)
    if arr.dtype.kind in "OSU":
        try:
            arr = as_strings(arr)
        except TypeError:
            raise StepError("%s returned %r holding %s, not numbers, bytes or str" % (
                what, name, type(arr.flat[0]).__name__ if arr.size else "objects")) from None
    if arr.ndim == 0:
        raise StepError("%s returned %r as one value (shape []) for a batch of %d: every value needs the batch axis "
                        "first" % (what, name, batch))
    if arr.shape[0] != batch:
        raise StepError("%s returned %d row(s) of %r (shape %s) for a batch of %d: return one row per sample of the "
                        "batch it is given (batch axis first), however many that is" % (
                            what, arr.shape[0], name, list(arr.shape), batch))
    return arr


def call_batch(function, inputs, what):
    """Call `function(**inputs)` on one batch; returns {name: array}; StepError on a failure or a bad answer."""
    batch = len(next(iter(inputs.values()))) if inputs else 1
    try:
        result = function(**inputs)
    except Exception as err:  # noqa: BLE001 - the user's function may raise anything
        raise StepError("%s failed: %s" % (what, _first_line(err))) from err
    if not isinstance(result, dict):
        raise StepError("%s returned %s, not a dict of named arrays: return {name: array}" % (
            what, type(result).__name__))
    return {str(k): normalise(k, v, batch, what) for k, v in result.items()}


def squeeze_scalars(inputs, scalar_names):
    """One value per sample arrives as [batch, 1] (its config dims): the function gets [batch]."""
    out = dict(inputs)
    for name in scalar_names:
        arr = out.get(name)
        if arr is not None and arr.ndim == 2 and arr.shape[-1] == 1:
            out[name] = arr.reshape(arr.shape[0])
    return out


def _same_shapes(requests):
    first = requests[0]
    return all(set(r) == set(first) and all(r[n].shape[1:] == first[n].shape[1:] for n in first) for r in requests)


def run_requests(function, requests, what):
    """One result per request: a dict of arrays, or a StepError's message. Requests of equal per-sample shapes
    run as one batch (the dynamic batcher's point), split back by their row counts."""
    if not requests:
        return []
    if len(requests) > 1 and _same_shapes(requests):
        sizes = [len(next(iter(r.values()))) if r else 1 for r in requests]
        merged = {n: np.concatenate([r[n] for r in requests]) for n in requests[0]}
        try:
            out = call_batch(function, merged, what)
        except StepError as err:
            return [str(err)] * len(requests)
        edges = np.cumsum([0] + sizes)
        return [{n: v[edges[i]:edges[i + 1]] for n, v in out.items()} for i in range(len(requests))]
    results = []
    for r in requests:
        try:
            results.append(call_batch(function, r, what))
        except StepError as err:
            results.append(str(err))
    return results


def missing_outputs(what, wanted, result):
    """The error line when `result` lacks some of the `wanted` output names, else None (both stub models use it)."""
    missing = [n for n in wanted if n not in result]
    if not missing:
        return None
    return "%s returned no %s (it returned %s)" % (what, ", ".join(missing), ", ".join(result))


def to_wire(arr, dtype, scalar):
    """A returned array as the config declares it: its dtype (strings stay objects), [batch, 1] for one value per
    sample."""
    arr = np.ascontiguousarray(arr, dtype=object if dtype == np.object_ else dtype)
    return arr.reshape(arr.shape[0], 1) if scalar and arr.ndim == 1 else arr
