# ruff: noqa: F811 - pytest fixtures imported from spark_fixtures are parameters here
"""The reference pipeline's plan: the end-of-stream marker must reach the watermark.

The generator ends with far-future "__end__" events that move the watermark past every real
window. Spark's optimizer pushes a filter that does not name the event-time column below
`withWatermark` (PushPredicateThroughNonJoin), so dropping the markers with a filter on `page`
right after the watermark hid them from it: the last windows never closed, and the demo's jobs
idled with the table short of the events produced. The marker filter has to sit above the
EventTimeWatermark node of the optimized plan. (The end-to-end check is test_cluster_demo.py.)
"""

from __future__ import annotations

from epochlog.cli.spark_demo import load_pipeline
from tests.integration.spark_fixtures import spark  # noqa: F401 - fixture


def test_the_end_marker_filter_stays_above_the_watermark(spark) -> None:
    pipeline = load_pipeline()
    events = (
        spark.readStream.format("rate")
        .load()
        .selectExpr(
            "to_json(named_struct('id', value, 'event_time', value * 1000, 'page', '/', "
            "'country', 'NL', 'user', 'u')) AS value"
        )
    )
    counts = pipeline.windowed_counts(events)
    assert counts.isStreaming
    # What counts.explain(True) prints (a streaming plan cannot be optimized outside a query,
    # but explain plans it as an incremental execution would).
    explained = counts._sc._jvm.PythonSQLUtils.explainString(
        counts._jdf.queryExecution(), "extended"
    )
    optimized = explained.split("== Optimized Logical Plan ==")[1].split("== Physical Plan ==")[0]
    plan = optimized.strip().splitlines()
    marker = [i for i, line in enumerate(plan) if pipeline.END_PAGE in line]
    watermark = [i for i, line in enumerate(plan) if "EventTimeWatermark" in line]
    assert len(marker) == 1 and "Filter" in plan[marker[0]], plan
    assert len(watermark) == 1, plan
    # Tree strings list parents first: the filter must come before (above) the watermark.
    assert marker[0] < watermark[0], "\n".join(plan)
