"""Open-loop measuring: what a replica sustains under arrivals it does not control, below `search` and
`deployment`, which both measure through it.

- ratepoint: one open-loop point (perf_analyzer --request-intervals from a seeded Poisson/constant schedule, latency
  also from the intended send time) and its pass rule; ratestore keeps the points (openloop.csv) for replay.
- capacity: bracket and bisect the highest rate a replica keeps up with at the SLO, repeated for the spread (the
  headroom it derives), and what a failed point did carry (the derating).
- holding: a capacity used only once it held k of k re-tests at the rate itself.
- together: several models' streams driven at once by one process (a group's mixed traffic).
- seed: the closed-loop point a search starts from.
"""
