"""What the service tells about itself: Prometheus metrics, lag against Kafka, the status page's view.

- ``metrics``: ``ServiceMetrics``, the ``CommitListener`` behind ``/metrics``;
- ``lag``: each partition's lag behind Kafka's log end, sampled in the background;
- ``status_view``: what ``GET /`` shows, built from the coordinator and the lag;
- ``freshness_plot``: the lag history as an inline SVG.
"""
