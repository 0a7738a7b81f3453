"""What a user reads: metrics from records, the JSON document, the table, the trace, the plot,
who held what at each OOM, what bounded progress, and `explain`'s account of it all.

Both runtimes hand over the same event records, so one piece of code measures a
prediction and a real run alike.
"""
