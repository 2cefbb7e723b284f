"""Placement: which waiting job goes on which node and cores, a pure function so the pass owns locks and writes.

- `types`: the values it works on and decides (a request, free capacity, waiting and running jobs, a plan);
- `backfill`: the order the queue is served in and backfill with reservations (`serve_order`, `place`);
- `reasons`: why a job waits (`Reason`, `WaitCode`) and the words of it (`reason_text`)."""
