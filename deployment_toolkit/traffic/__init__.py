"""Traffic as users record it, read by its content: a Prometheus range-query answer (rates, or Triton's counters
turned into rates), a request log (CSV or JSON Lines, one row per request), or a CSV of time,rate; one rate series
per model on one grid (`series`), the figures the planner uses (`stats`), their plot, and send times that keep the
traffic's bursts (`arrivals`). Below `deployment` and `commands`; imports only errors, inputfile and config.fields."""
