"""003 §5 in virtual time (sojourn.reproduce.section5_model): a spec's DWFS runs replayed by the
real `sojourn-engine stages`, one row per (run, way of sharing the CPU, stage order, seed, class),
and the rates it summarizes."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from sojourn.reproduce import section5_model


def _published_front_end(directory: Path, process_s: float, stages_s: list[float], requests: int) -> Path:
    """A publication of one repetition whose server burned ``process_s`` of CPU in 60 s, its
    stages ``stages_s``, over ``requests`` requests."""
    rep = directory / "dwfs-workers4-users=60" / "0"
    rep.mkdir(parents=True)
    (rep / "summary.json").write_text(json.dumps({"sessions": {
        "anatomy": [{"stage": f"S{i}", "cpu_s": cpu} for i, cpu in enumerate(stages_s)],
        "overall": {"requests": requests}}}))
    pd.DataFrame({"t_s": [0.0, 30.0, 60.0], "server_cpu": [0.0, process_s / 60, process_s / 60]}).to_csv(
        rep / "counters.csv", index=False)
    return directory


def test_the_front_end_cost_is_the_process_cpu_the_stages_did_not_burn_per_request(tmp_path):
    published = _published_front_end(tmp_path / "p", 59.7, [40.0, 18.3], 14000)
    assert section5_model.front_end_cost_s(published) == pytest.approx(1.4 / 14000)
    (published / "dwfs-workers4-users=60" / "0" / "summary.json").write_text(json.dumps({"sessions": {
        "anatomy": [{"stage": "S0"}], "overall": {"requests": 14000}}}))  # summarized before cpu_s
    assert section5_model.front_end_cost_s(published) is None
    assert section5_model.front_end_cost_s(tmp_path / "nothing") is None


def test_a_spec_is_replayed_per_run_stage_order_seed_and_class(tmp_path, monkeypatch):
    monkeypatch.setattr(section5_model, "SPECS", {"section5-demand20": "experiments/003/section5-demand20.toml"})
    # The front end's cost made large (1 ms a request) so that it shows in three seeds.
    monkeypatch.setattr(section5_model, "FRONT_END_RUNS",
                        _published_front_end(tmp_path / "onecore", 60.0, [40.0, 10.0], 10000))
    out = tmp_path / "out"
    assert section5_model.main(["--out", str(out), "--quick"]) == 0
    model = pd.read_csv(out / "model.csv")
    # Three user counts x the ways of sharing the CPU x three stage orders x three seeds x gold,
    # silver, bronze; the 40-user point is under the worker's capacity and the 60-user one 1.42
    # times it (the spec's comment).
    assert len(model) == 81 * len(section5_model.SERVICES) and set(model["class"]) == {"gold", "silver", "bronze"}
    assert set(model["stage_order"]) == set(section5_model.STAGE_ORDERS)
    assert (model["completed"] > 0).all()
    by_users = model.groupby("users")[["completed", "timed_out"]].sum()
    assert by_users.loc[60, "timed_out"] > by_users.loc[40, "timed_out"]
    summary = json.loads((out / "summary.json").read_text())
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
    # The front end's CPU on top of every request's cost misses more than the stages alone.
    front_end = point["by_service"]["threads-4-patient-front-end"]
    assert front_end["front_end_s"] == pytest.approx(0.001) and point["by_service"]["threads-4"]["front_end_s"] == 0

    def missed(service: str) -> float:
        rates = point["by_service"][service]
        return sum(rates[key]["deadline"]["gold"] for key in ("drop_rate_by_stage_order", "late_rate_by_stage_order"))
    assert missed("threads-4-patient-front-end") > missed("threads-4-patient")
    assert not list(out.glob("*.partial"))


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
    costlier = section5_model.stages_argv(config, 7, service="threads-4-patient-front-end", front_end_s=0.0001)
    assert dict(zip(costlier[2:], costlier[3:]))["--service-times"] == "0.0051,0.0026"
    assert section5_model.stages_argv(config, 7, front_end_s=0.0001) == argv  # only its own service adds it
    with pytest.raises(ValueError, match="needs the front end's cost"):
        section5_model.stages_argv(config, 7, service="threads-4-patient-front-end")
