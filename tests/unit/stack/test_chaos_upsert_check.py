"""The chaos run's check of its upsert table: the model of the produced changes and the diff."""

from __future__ import annotations

from lakegate_stack.chaos import UPSERT_EVERY, UPSERT_KEYS, upsert_key, upsert_mismatches_of, upsert_model


def test_the_model_holds_each_keys_last_change() -> None:
    cycle = UPSERT_EVERY * UPSERT_KEYS  # records in which every key changes once
    produced = 3 * cycle + 5  # three cycles, then records 3 * cycle .. +4: keys 0 and 1 change again
    model = upsert_model(produced)
    assert len(model) == UPSERT_KEYS
    assert model[0] == 3 * cycle and model[1] == 3 * cycle + UPSERT_EVERY
    assert model[2] == 2 * cycle + 2 * UPSERT_EVERY  # key 2 last changed in the third cycle
    assert all(upsert_key(i) == k for k, i in model.items())


def test_mismatches_name_a_stale_row_a_missing_key_an_extra_key_and_a_key_twice() -> None:
    model = {1: 10, 2: 20, 3: 30}
    assert upsert_mismatches_of([{"id": k, "seq": s} for k, s in model.items()], model) == []
    rows = [{"id": 1, "seq": 9}, {"id": 2, "seq": 20}, {"id": 2, "seq": 20}, {"id": 4, "seq": 40}]
    assert upsert_mismatches_of(rows, model) == [
        "key 2 is in the table twice",
        "key 1: seq 9 in the table, 10 last produced",
        "key 3: seq None in the table, 30 last produced",
        "key 4: seq 40 in the table, None last produced",
    ]
    many = upsert_mismatches_of([], {k: k for k in range(25)})
    assert len(many) == 21 and many[-1] == "... and 5 more"
