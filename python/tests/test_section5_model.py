"""003 §5 in virtual time (sojourn.reproduce.section5_model): a spec's DWFS runs replayed by the
real `sojourn-engine stages`, one row per (run, way of sharing the CPU, stage order, seed, class),
and the rates it summarizes."""

from __future__ import annotations

import json

import pandas as pd

from sojourn.reproduce import section5_model


def test_a_spec_is_replayed_per_run_stage_order_seed_and_class(tmp_path, monkeypatch):
    monkeypatch.setattr(section5_model, "SPECS", {"section5-demand20": "experiments/003/section5-demand20.toml"})
    assert section5_model.main(["--out", str(tmp_path), "--quick"]) == 0
    model = pd.read_csv(tmp_path / "model.csv")
    # Three user counts x the ways of sharing the CPU x three stage orders x three seeds x gold,
    # silver, bronze; the 40-user point is under the worker's capacity and the 60-user one 1.42
    # times it (the spec's comment).
    assert len(model) == 81 * len(section5_model.SERVICES) and set(model["class"]) == {"gold", "silver", "bronze"}
    assert set(model["stage_order"]) == set(section5_model.STAGE_ORDERS)
    assert (model["completed"] > 0).all()
    by_users = model.groupby("users")[["completed", "timed_out"]].sum()
    assert by_users.loc[60, "timed_out"] > by_users.loc[40, "timed_out"]
    summary = json.loads((tmp_path / "summary.json").read_text())
    point = summary["section5-demand20/dwfs-users=60"]
    assert point["seeds"] == 3 and 0 < point["drop_rate"]["gold"] < 0.05
    by_order = point["drop_rate_by_stage_order"]
    assert list(by_order) == list(section5_model.STAGE_ORDERS) and by_order["deadline"] == point["drop_rate"]
    # Class-blind arrival order drops mostly the class with the shortest bound; strict class
    # priority mostly the one with the longest.
    assert by_order["arrival"]["gold"] > by_order["arrival"]["bronze"]
    assert by_order["class"]["bronze"] > by_order["class"]["gold"]
    # One request at a time is the summary's own; threads sharing the CPU in deadline order
    # narrow the split between bronze and gold (DWFS's order counts for less once every
    # request on the CPU progresses).
    assert point["by_service"]["one"]["drop_rate_by_stage_order"] == by_order
    def split(service: str) -> float:
        means = point["by_service"][service]["response_mean_s_by_stage_order"]["deadline"]
        return means["bronze"] / means["gold"]
    assert split("ready-queue-16") < split("one")
    # Late requests are timed out but not dropped: one at a time hardly any finish late; four
    # threads sharing the CPU make many late, and more when a late response does not end its
    # session (the testbed's clients), since its session's next requests come on.
    assert (model["late"] <= model["timed_out"]).all()
    late = {service: point["by_service"][service]["late_rate_by_stage_order"]["deadline"]["gold"]
            for service in ("one", "threads-4", "threads-4-patient")}
    assert late["one"] < late["threads-4"] < late["threads-4-patient"]
    assert not list(tmp_path.glob("*.partial"))


def test_the_options_follow_the_spec(monkeypatch):
    config = {"server": {"stages": {"policy": "dwfs", "stage": [{"processing_ms": 5.0}, {"processing_ms": 2.5}],
                                    "class": [{"timeout_ms": 100.0}, {"timeout_ms": 200.0}]}},
              "workload": {"duration_s": 60.0, "sessions": {"users": 60, "exit": 0.1, "think_s": 0.1}}}
    argv = section5_model.stages_argv(config, 7)
    given = dict(zip(argv[2:], argv[3:]))
    assert given["--service-times"] == "0.005,0.0025" and given["--timeout"] == "0.1,0.2"
    assert (given["--clients"], given["--session-length"], given["--seed"]) == ("60", "10.0", "7")
    assert "--exponential-think" in argv and "--deterministic-service" in argv
    assert given["--stage-order"] == "deadline"
    assert given["--threads"] == "1" and "--ready-queue" not in argv
    assert section5_model.stages_argv(config, 7, "arrival")[-4:-2] == ["--stage-order", "arrival"]
    queued = section5_model.stages_argv(config, 7, service="ready-queue-8")
    assert queued[-3:] == ["--threads", "8", "--ready-queue"]
    config["workload"]["sessions"]["delay_bound_s"] = 2.0
    patient = section5_model.stages_argv(config, 7, service="threads-4-patient")
    assert patient[-4:] == ["--threads", "4", "--session-bound", "2.0"]
