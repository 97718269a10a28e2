"""Session workloads in experiment specs: schema, rejected combinations, and the files
the runner generates for `serve --stages` and `load sessions` (parsed back as TOML)."""

from __future__ import annotations

import tomllib

import pytest

from sojourn.runner import session_workload as sessions
from sojourn.runner.spec import SpecError, load_spec, validate

GROUPS = [{"name": "gold"}, {"name": "silver"}, {"name": "bronze"}]


def session_spec(**workload):
    return {"name": "s", "network": {"groups": GROUPS}, "workload": {"mode": "sessions", **workload}}


def test_sessions_spec_defaults_and_variant_override_of_inline_stages():
    raw = session_spec()
    raw["server"] = {"stages": {"policy": "dwfs"}}
    raw["variants"] = {"fifo": {"server": {"stages": {"policy": "fifo"}}}, "dwfs": {}}
    runs = validate(raw).runs
    assert [r.config["server"]["stages"]["policy"] for r in runs] == ["fifo", "dwfs"]
    assert runs[0].config["workload"]["sessions"]["rate"] == 5.0


def test_sweep_over_session_rate_names_runs():
    raw = session_spec()
    raw["sweep"] = {"parameter": "workload.sessions.rate", "values": [2, 4.5]}
    assert [r.name for r in validate(raw).runs] == ["rate=2", "rate=4.5"]


@pytest.mark.parametrize("raw, message", [
    ({"name": "s", "workload": {"mode": "sessions"}}, "class 'gold' has no networks"),
    (session_spec(rho=0.5), "workload.rho is for workload.mode = 'open'"),
    (session_spec(abort_after_s=1.0), "workload.abort_after_s is for workload.mode = 'open'"),
    ({**session_spec(), "server": {"kind": "nginx"}}, "only server.kind = 'sojourn'"),
    ({**session_spec(), "server": {"stages": {"polcy": "fifo"}}}, "unknown key server.stages.polcy"),
    ({**session_spec(), "server": {"stages": {"policy": "lifo"}}}, "server.stages.policy = 'lifo' is not accepted"),
    ({**session_spec(), "server": {"stages": {"stage_order": "fifo"}}},
     "server.stages.stage_order = 'fifo' is not accepted; accepted: 'deadline', 'class', 'arrival'"),
    ({**session_spec(), "server": {"stages": {"stage": [{"name": "MM"}]}}}, "server.stages.stage.0 needs processing_ms"),
    ({**session_spec(), "server": {"stages": {"series_csv": "x.csv"}}}, "series_csv is set by the runner"),
    ({**session_spec(), "server": {"stages": {"class": [{"name": "vip", "timeout_ms": 50}]}}},
     "class 'vip' has no networks"),
    (session_spec(sessions={"rate": 0}), "workload.sessions.rate = 0 is below its minimum"),
    (session_spec(mode="bursty"), "workload.mode = 'bursty' is not accepted"),
    (session_spec(timeout_s=0.15, sessions={"class_bounds": True, "delay_bound_s": 0.1}),
     "server.stages class 'silver' timeout_ms = 0.15 s must be below workload.timeout_s = 0.15"),
    (session_spec(sessions={"delay_bound_s": 70.0}), "workload.sessions.delay_bound_s = 70.0 s must be below"),
])
def test_bad_session_specs_are_rejected_naming_the_key(raw, message):
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(".", r"\.")):
        validate(raw)


def test_stages_file_path_is_read_and_checked(tmp_path):
    (tmp_path / "stages.toml").write_text('policy = "wfs"\n[[class]]\nname = "gold"\ntimeout_ms = 80\n')
    spec = tmp_path / "s.toml"
    spec.write_text('name = "s"\n[server]\nstages = "stages.toml"\n[[network.groups]]\nname = "gold"\n'
                    '[workload]\nmode = "sessions"\n')
    (run,) = load_spec(spec).runs
    assert run.config["server"]["stages"] == {"policy": "wfs", "class": [{"name": "gold", "timeout_ms": 80.0}]}
    (tmp_path / "stages.toml").write_text('policy = "wfs"\nworkerz = 2\n')
    with pytest.raises(SpecError, match="unknown key server.stages .*workerz"):
        load_spec(spec)
    spec.write_text(spec.read_text().replace('"stages.toml"', '"missing.toml"'))
    with pytest.raises(SpecError, match="missing.toml"):
        load_spec(spec)


def test_generated_stages_file_and_class_map(tmp_path):
    stages = {"policy": "fifo", "stage": [{"name": "A", "processing_ms": 2.0}],
              "class": [{"name": "gold", "timeout_ms": 100.0}, {"name": "rest", "timeout_ms": 300.0,
                                                                 "networks": ["10.78.9.0/24"]}]}
    addrs = {"gold": ["10.78.0.1", "10.78.0.2"], "other": ["10.78.1.1"]}
    path = sessions.stages_file(stages, addrs, tmp_path / "series.csv", tmp_path / "stages.toml")
    written = tomllib.loads(path.read_text())
    assert written["policy"] == "fifo" and written["series-csv"] == str(tmp_path / "series.csv")
    assert written["class"][0]["networks"] == ["10.78.0.1", "10.78.0.2"]
    assert written["stage"] == [{"name": "A", "processing-ms": 2.0}]
    assert written["class"][1] == {"name": "rest", "timeout-ms": 300.0, "networks": ["10.78.9.0/24"]}
    classes = sessions.effective_classes(stages, addrs)
    mapping = sessions.class_map(classes, ["10.78.0.1", "10.78.1.1", "10.78.9.7", "10.78.0.2"])
    # 10.78.1.1 matches no class: the last class, as the stage pool does.
    assert mapping["address_classes"] == [0, 1, 1, 0]
    assert mapping["delay_bounds_s"] == [0.1, 0.3]


def test_generated_session_model_rows_sum_to_one(tmp_path):
    path = sessions.session_model({}, {"rate": 3.0, "exit": 0.2, "think_s": 0.5, "delay_bound_s": 1.0,
                                       "on_failure": "continue"}, tmp_path / "model.toml")
    model = tomllib.loads(path.read_text())
    assert model["arrival-rate"] == 3.0 and model["start"] == {"MM": 1.0}
    assert model["think-time"] == {"distribution": "exponential", "mean-s": 0.5}
    assert model["on-failure"] == "continue"
    assert sorted(model["states"]) == ["BR", "CO", "MM", "SR"]
    for state in model["states"].values():
        assert sum(state["next"].values()) == pytest.approx(1.0)
        assert state["next"]["exit"] == 0.2
    with pytest.raises(ValueError, match="transitions must be 1x1"):
        sessions.session_model({"stage": [{"name": "A", "processing_ms": 1}], "transitions": [[1, 0]]},
                               {"rate": 1, "exit": 0.1, "think_s": 0, "delay_bound_s": 1, "on_failure": "restart"},
                               tmp_path / "m.toml")


def test_session_model_file_is_resolved_against_the_spec(tmp_path):
    (tmp_path / "model.toml").write_text("arrival-rate = 1.0\n")
    spec = tmp_path / "s.toml"
    spec.write_text('name = "s"\n[[network.groups]]\nname = "gold"\n[[network.groups]]\nname = "silver"\n'
                    '[[network.groups]]\nname = "bronze"\n[workload]\nmode = "sessions"\n'
                    'sessions = { model_file = "model.toml" }\n')
    (run,) = load_spec(spec).runs
    assert run.config["workload"]["sessions"]["model_file"] == str(tmp_path / "model.toml")
    (tmp_path / "model.toml").unlink()
    with pytest.raises(SpecError, match="workload.sessions.model_file 'model.toml' not found"):
        load_spec(spec)


def test_closed_loop_users_and_class_bounds_in_the_generated_model(tmp_path):
    """003 §5: closed-loop users instead of Poisson sessions; with class_bounds each class's
    clients give up at their class's timeout, and every class lists its source addresses."""
    classes = sessions.class_map(sessions.effective_classes({}, {"gold": ["10.1.0.1"], "silver": ["10.1.0.2"],
                                                                 "bronze": ["10.1.0.3", "10.1.0.4"]}),
                                 ["10.1.0.1", "10.1.0.2", "10.1.0.3", "10.1.0.4"])
    settings = {"rate": 5.0, "users": 40, "exit": 0.1, "think_s": 0, "delay_bound_s": 1.0, "class_bounds": True,
                "on_failure": "restart"}
    model = tomllib.loads(sessions.session_model({}, settings, tmp_path / "m.toml", classes).read_text())
    assert model["users"] == 40 and "arrival-rate" not in model
    assert model["classes"] == [{"name": "gold", "delay-bound-s": 0.1, "sources": ["10.1.0.1"]},
                                {"name": "silver", "delay-bound-s": 0.15, "sources": ["10.1.0.2"]},
                                {"name": "bronze", "delay-bound-s": 0.2, "sources": ["10.1.0.3", "10.1.0.4"]}]
    uniform = tomllib.loads(sessions.session_model({}, {**settings, "users": 0, "class_bounds": False},
                                                   tmp_path / "u.toml", classes).read_text())
    assert uniform["arrival-rate"] == 5.0 and "users" not in uniform
    assert {c["delay-bound-s"] for c in uniform["classes"]} == {1.0}


def test_a_profile_sets_the_open_loops_session_rate_per_period(tmp_path):
    """workload.profile in sessions mode: each period of 000 Table 1's profile at its rho
    times workload.sessions.rate (the rate at rho 1), in the model's arrival-profile."""
    workload = {"profile": "W7", "time_compression": 1.0, "sessions": {"rate": 10.0}}
    profile = sessions.arrival_profile(workload)
    assert profile == [{"length-s": 63.0, "rate": 4.0}, {"length-s": 6.0, "rate": 50.0}]
    assert sessions.arrival_profile({**workload, "time_compression": 3.0})[1] == {"length-s": 2.0, "rate": 50.0}
    assert sessions.arrival_profile({**workload, "profile": ""}) is None
    settings = {"rate": 10.0, "exit": 0.1, "think_s": 0, "delay_bound_s": 1.0, "on_failure": "restart"}
    model = tomllib.loads(sessions.session_model({}, settings, tmp_path / "m.toml", profile=profile).read_text())
    assert model["arrival-profile"] == profile and "arrival-rate" not in model


SESSIONS_SPEC = ('name = "s"\n[[network.groups]]\nname = "gold"\n[[network.groups]]\nname = "silver"\n'
                 '[[network.groups]]\nname = "bronze"\n[workload]\nmode = "sessions"\n')


@pytest.mark.parametrize("extra, error", [
    ('profile = "W4"\nsessions = { users = 40 }\n', "remove workload.sessions.users"),
    ('profile = "W4"\nsessions = { model_file = "model.toml" }\n', "remove workload.sessions.model_file"),
    ('rho = 1.2\n', "workload.rho is for workload.mode = 'open'"),
])
def test_a_session_profile_refuses_arrivals_it_cannot_shape(tmp_path, extra, error):
    (tmp_path / "model.toml").write_text("arrival-rate = 1.0\n")
    spec = tmp_path / "s.toml"
    spec.write_text(SESSIONS_SPEC + extra)
    with pytest.raises(SpecError, match=error):
        load_spec(spec)


def test_a_session_profiles_run_lasts_its_cycles_and_carries_its_periods(tmp_path):
    from sojourn.runner.inputs import session_inputs
    from sojourn.runner.plan import load_seconds

    spec = tmp_path / "s.toml"
    spec.write_text(SESSIONS_SPEC + 'profile = "W4"\ncycles = 1.5\nsessions = { rate = 10 }\n')
    (run,) = load_spec(spec).runs
    workload = run.config["workload"]
    assert load_seconds(run.config) == 75.0 and run.plan.load.duration == 75.0
    periods = session_inputs(workload, tmp_path / "inputs").periods
    assert [(p["start_s"], p["end_s"], p["target_rho"], p["sessions_per_s"]) for p in periods] == [
        (0.0, 25.0, 0.4, 4.0), (25.0, 50.0, 1.4, 14.0), (50.0, 75.0, 0.4, 4.0)]
