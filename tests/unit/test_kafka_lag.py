"""The ``kafka_lag`` data-quality outcome of a Kafka source's run (``source_tasks.kafka_lag_outcome``)."""

from __future__ import annotations

from cdclake.source_tasks import kafka_lag_outcome

LAG = {"shop.public.orders": {"0": 3, "1": 0}, "shop.public.customers": {"0": 4}}


def test_lag_within_the_threshold_holds() -> None:
    outcome = kafka_lag_outcome(LAG, 7)
    assert outcome.expectation == "kafka_lag" and outcome.success
    assert outcome.observed_value == {"total": 7, "partitions": LAG}
    assert outcome.details == {"max_lag": 7}


def test_lag_over_the_threshold_fails_and_no_threshold_only_records() -> None:
    assert not kafka_lag_outcome(LAG, 6).success
    assert kafka_lag_outcome(LAG, None).success
    assert kafka_lag_outcome({}, 0).observed_value == {"total": 0, "partitions": {}}
