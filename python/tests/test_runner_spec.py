"""Experiment spec validation: every spec in experiments/ is valid; every kind of bad
spec is rejected with the offending key named."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sojourn.runner.spec import SpecError, load_spec, validate

REPO = Path(__file__).resolve().parents[2]

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"

BASE = {"name": "t", "workload": {"rho": 0.5}}


def spec(**sections):
    out = {"name": "t", "workload": {"rho": 0.5}}
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


@pytest.mark.parametrize("path", sorted(EXPERIMENTS.glob("*.toml")), ids=lambda p: p.name)
def test_every_spec_in_experiments_is_valid(path):
    experiment = load_spec(path)
    assert experiment.runs
    assert experiment.name == path.stem
    names = [run.name for run in experiment.runs]
    assert len(names) == len(set(names))


def test_defaults_are_filled():
    experiment = validate(spec())
    (run,) = experiment.runs
    assert run.config["network"]["link_mbps"] == 10.0
    assert run.config["network"]["tcp"]["syn_backlog"] == 512
    assert run.config["server"]["kind"] == "sojourn"
    assert experiment.baseline == "run"


def test_the_emulator_runs_when_a_group_needs_it_or_the_spec_says_on():
    """002 Fig. 8 weighs the emulator itself: "on" puts it in the path of a plain wire."""
    def emulated(network: dict) -> bool:
        return validate(spec(network=network)).runs[0].plan.testbed.uses_emulator
    assert not emulated({}) and not emulated({"groups": [{"name": "wan"}]})
    assert not emulated({"groups": [{"name": "wan", "mtu": 576}]}), "an MTU is the server's route's"
    assert emulated({"groups": [{"name": "wan", "rtt_ms": 100}]})
    assert emulated({"emulator": "on"}) and emulated({"emulator": "on", "groups": [{"name": "wan"}]})


@pytest.mark.parametrize("raw, message", [
    (spec(servr={}), r"unknown key servr in the top level"),
    (spec(server={"polcy": "srpt"}), r"unknown key server\.polcy in \[server\]; accepted: kind, policy"),
    (spec(network={"tcp": {"sak": True}}), r"unknown key network\.tcp\.sak"),
    (spec(server={"workers": "2"}), r"server\.workers must be an integer, got str '2'"),
    (spec(server={"workers": True}), r"server\.workers must be an integer, got True"),
    (spec(network={"link_mbps": "10M"}), r"network\.link_mbps must be an integer or a number"),
    (spec(server={"policy": "sjf"}), r"server\.policy = 'sjf' is not accepted; accepted: 'fair', 'srpt', 'las'"),
    (spec(workload={"profile": "W11"}), r"workload\.profile = 'W11' is not accepted"),
    (spec(network={"groups": [{"rtt_ms": -1}]}), r"network\.groups\.0\.rtt_ms = -1 is below its minimum 0"),
    (spec(network={"groups": [{"los": 0.1}]}), r"unknown key network\.groups\.0\.los"),
    (spec(network={"groups": [{"name": "a"}, {"name": "a"}]}), r"group names must be unique"),
    (spec(server={"kind": "nginx", "policy": "srpt"}), r"server\.policy = 'srpt' needs server\.kind = 'sojourn'"),
    (spec(server={"kind": "nginx", "kernel_bands": True}, network={"bands": "1K"}), r"server\.kernel_bands = True needs server\.kind"),
    (spec(server={"kernel_bands": True}), r"server\.kernel_bands = true needs network\.bands"),
    (spec(server={"kind": "nginx", "linger_close": True}), r"server\.linger_close = True needs server\.kind = 'sojourn'"),
    (spec(server={"kind": "h2o", "write_concurrency": 1}), r"server\.write_concurrency = 1 needs server\.kind = 'sojourn'"),
    (spec(server={"kind": "command", "command": ["x"], "max_connections": 5}), r"server\.max_connections cannot be set"),
    (spec(server={"notsent_lowat": "16 XB"}), r"\[server\]: sojourn's serve refuses it \(--notsent-lowat"),
    (spec(server={"quantum": "0"}), r"\[server\]: sojourn's serve refuses it \(--quantum 0: expected at least one byte"),
    (spec(server={"admission": "codle"}), r"--admission: unknown admission policy \"codle\": expected one of gradient"),
    (spec(server={"head_fields": "lean"}), r"server\.head_fields = 'lean' is not accepted; accepted: 'full', 'minimal'"),
    (spec(server={"kind": "nginx", "head_fields": "minimal"}), r"server\.head_fields = 'minimal' needs server\.kind = 'sojourn'"),
    (spec(server={"kind": "nginx", "delayed_ack": True}), r"server\.delayed_ack = True needs server\.kind = 'sojourn'"),
    (spec(server={"kind": "nginx", "write_concurrency_from": "50K"}), r"server\.write_concurrency_from = '50K' needs server\.kind = 'sojourn'"),
    (spec(server={"write_concurrency": 1, "write_concurrency_from": "50K"}), r"--write-concurrency-from 50K: needs --policy srpt"),
    (spec(server={"policy": "srpt", "write_concurrency_from": "50K"}), r"--write-concurrency-from 50K: needs --write-concurrency"),
    (spec(network={"queue_bytes": 30000, "queue_packets": 100}), r"queue_bytes=30000 and queue_packets=100: give one queue limit"),
    (spec(network={"tcp": {"initial_rto_ms": -1}}), r"network\.tcp\.initial_rto_ms = -1 is below its minimum 0"),
    (spec(network={"bands": "1K;2K"}), r"the testbed cannot be built: bands='1K;2K': item '1K;2K' is not a size"),
    (spec(server={"kind": "command"}), r"server\.kind = 'command' needs server\.command"),
    (spec(workload={"rho": 0.0}), r"workload needs a load"),
    (spec(workload={"profile": "W1", "rho": 0.5}), r"workload\.profile and workload\.rho are exclusive"),
    (spec(workload={"retries": 2}), r"workload\.retries = 2 needs workload\.abort_after_s"),
    (spec(workload={"abort_after_s": 5.0, "timeout_s": 5.0}), r"workload\.abort_after_s = 5\.0 must be below workload\.timeout_s"),
    (spec(sweep={"parameter": "workload.rho"}), r"sweep needs both"),
    (spec(sweep={"parameter": "workload.rhoo", "values": [1]}), r"sweep\.parameter 'workload\.rhoo' does not name"),
    (spec(sweep={"parameter": "workload.persistent", "values": [1, 2.5]}), r"sweep\.values\.1 must be an integer"),
    (spec(sweep={"parameter": "network.groups.0.rtt_ms", "values": [0, 10]}), r"network\.groups has 0 element"),
    (spec(variants={"x": {"server": {"policy": "srtp"}}}), r"variants\.x: server\.policy = 'srtp' is not accepted"),
    (spec(variants={"x": {"name": "y"}}), r"unknown key variants\.x\.name"),
    (spec(variants={"x": {"server": {"kernel_bands": True}}}), r"variants\.x: server\.kernel_bands = true needs network\.bands"),
    (spec(baseline="nope"), r"baseline = 'nope' is not a run"),
    (spec(network={"emulator": "off"}), r"network\.emulator = 'off' is not accepted; accepted: 'auto', 'on'"),
    ({"workload": {"rho": 0.5}}, r"name must be a non-empty string"),
    ({"name": "../x", "workload": {"rho": 0.5}}, r"name must be a non-empty string"),
])
def test_bad_specs_are_rejected_naming_the_key(raw, message):
    with pytest.raises(SpecError, match=message):
        validate(raw)


def test_variants_times_sweep_times_repetitions():
    raw = spec(repetitions=3, variants={"fair": {}, "srpt": {"server": {"policy": "srpt"}}},
               network={"groups": [{"name": "g"}]},
               sweep={"parameter": "network.groups.0.rtt_ms", "values": [0, 75.0, 150]})
    experiment = validate(raw)
    assert experiment.repetitions == 3
    assert [r.name for r in experiment.runs] == ["fair-rtt_ms=0", "fair-rtt_ms=75", "fair-rtt_ms=150",
                                                 "srpt-rtt_ms=0", "srpt-rtt_ms=75", "srpt-rtt_ms=150"]
    assert [r.config["network"]["groups"][0]["rtt_ms"] for r in experiment.runs[:3]] == [0, 75.0, 150]
    assert {r.config["server"]["policy"] for r in experiment.runs[3:]} == {"srpt"}
    # Variants do not leak into each other or into the base.
    assert {r.config["server"]["policy"] for r in experiment.runs[:3]} == {"fair"}


def test_spec_file_errors(tmp_path):
    with pytest.raises(SpecError, match="no such spec file"):
        load_spec(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("name = \n")
    with pytest.raises(SpecError, match="bad.toml: not valid TOML"):
        load_spec(bad)
    trace = tmp_path / "t.toml"
    trace.write_text('name = "t"\n[workload]\ntrace = "nope.csv"\n')
    with pytest.raises(SpecError, match="workload.trace 'nope.csv' not found"):
        load_spec(trace)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_nan_and_infinity_are_rejected_naming_the_key(value):
    with pytest.raises(SpecError, match=r"workload\.rho = .*: expected a finite number"):
        validate(spec(workload={"rho": float(value)}))
    with pytest.raises(SpecError, match=r"workload\.duration_s = .*: expected a finite number"):
        validate(spec(workload={"rho": 0.5, "duration_s": float(value)}))
    with pytest.raises(SpecError, match=r"sweep\.values\.1 = .*: expected a finite number"):
        validate(spec(sweep={"parameter": "workload.rho", "values": [0.5, float(value)]}))


def test_check_names_a_missing_server_program(tmp_path):
    from sojourn.runner.spec import missing_programs

    experiment = validate(spec(server={"kind": "command", "command": ["/nonexistent/httpd", "{port}"]}))
    assert any("'/nonexistent/httpd', which is not installed" in p for p in missing_programs(experiment))
    path = tmp_path / "s.toml"
    path.write_text('name = "s"\n[server]\nkind = "command"\ncommand = ["/nonexistent/httpd"]\n[workload]\nrho = 0.5\n')
    done = subprocess.run([sys.executable, "-m", "sojourn.cli", "run", str(path), "--check"], capture_output=True, text=True)
    assert done.returncode == 2 and "/nonexistent/httpd" in done.stdout + done.stderr


def test_check_notes_a_base_sweep_the_spec_does_not_inherit(tmp_path):
    """A spec over a swept base runs one point unless it has a sweep of its own (7 Dec 2026:
    an experiment ran 40 clients only); `sojourn run` says so before it runs."""
    (tmp_path / "swept.toml").write_text('name = "s"\n[workload]\nrho = 0.5\n'
                                         '[sweep]\nparameter = "workload.rho"\nvalues = [0.3, 0.6]\n')
    (tmp_path / "child.toml").write_text('base = "swept.toml"\nname = "c"\n')
    done = subprocess.run([sys.executable, "-m", "sojourn.cli", "run", str(tmp_path / "child.toml"), "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0
    assert "note: child.toml: its base swept.toml sweeps workload.rho over 2 value(s)" in " ".join(done.stdout.split())
    assert "run: 1 repetition(s)" in done.stdout


def test_a_run_that_failed_before_finishing_anything_neither_pins_its_spec_nor_leaves_inputs(tmp_path):
    """A failed run leaves no half-made inputs entry and a status saying why; the corrected
    spec then runs into the same directory without --fresh."""
    from sojourn.runner.experiment import run_experiment

    (tmp_path / "empty.csv").write_text("arrival_s,client,path,size\n")
    results = tmp_path / "results"
    for attempt in ("first", "second"):  # two different spec texts, both failing at the inputs
        path = tmp_path / "t.toml"
        path.write_text(f'# {attempt}\nname = "t"\n[workload]\ntrace = "empty.csv"\n')
        with pytest.raises(ValueError, match="empty trace"):
            run_experiment(load_spec(path), results)
        assert (results / "t" / "spec.toml").read_text() == path.read_text()
        assert not [p for p in (results / "t" / "inputs").iterdir()], "a half-made inputs entry was left"
        status = json.loads((results / "t" / "run" / "0" / "status.json").read_text())
        assert status["state"] == "partial" and "inputs failed" in status["reason"]


def test_runs_keeps_only_the_named_runs_from_the_spec_or_the_command_line(tmp_path):
    raw = spec(variants={"fair": {}, "srpt": {"server": {"policy": "srpt"}}, "las": {"server": {"policy": "las"}}},
               baseline="fair")
    chosen = validate({**raw, "runs": ["las", "srpt"]})
    assert [r.name for r in chosen.runs] == ["srpt", "las"]  # the spec's order
    assert chosen.baseline == "srpt"  # fair is not run: the first run that is
    with pytest.raises(SpecError, match=r"runs: no run named 'lsa'; the spec's runs: fair, srpt, las"):
        validate({**raw, "runs": ["lsa"]})
    with pytest.raises(SpecError, match=r"runs must be an array of run names"):
        validate({**raw, "runs": [1]})
    path = tmp_path / "t.toml"
    path.write_text('name = "t"\n[workload]\nrho = 0.5\n[variants.fair]\n[variants.srpt]\nserver.policy = "srpt"\n')
    listed = subprocess.run([sys.executable, "-m", "sojourn.cli", "run", str(path), "--check", "--runs", "srpt"],
                            capture_output=True, text=True)
    assert listed.returncode == 0 and listed.stdout.split() == ["srpt:", "1", "repetition(s)"]
    wrong = subprocess.run([sys.executable, "-m", "sojourn.cli", "run", str(path), "--check", "--runs", "srpt,nope"],
                           capture_output=True, text=True)
    assert wrong.returncode == 2 and "no run named 'nope'" in wrong.stdout + wrong.stderr


def test_no_repetition_starts_after_stop_at(tmp_path):
    """--stop-after: what is left when the time is up is not started (no directory, nothing
    half-run), told as such, and the outcome is not complete, so the next run does it."""
    import time

    from sojourn.runner.experiment import NOT_STARTED, STOPPED_AT_DEADLINE, run_experiment

    experiment = validate({"name": "late", "repetitions": 2, "workload": {"rho": 0.5}})
    told = []
    outcome = run_experiment(experiment, tmp_path, stop_at=time.time() - 1,
                             on_event=lambda kind, data: told.append((kind, data.get("state"))))
    assert outcome.states == {("run", 0): NOT_STARTED, ("run", 1): NOT_STARTED} and not outcome.complete
    assert told == [("done", NOT_STARTED)] * 2
    assert not (tmp_path / "late" / "run").exists()
    assert outcome.status == STOPPED_AT_DEADLINE


@pytest.mark.parametrize("states, status", [
    (["complete", "complete"], 0),
    (["complete", "not started"], 75),
    (["partial", "not started"], 1),
    (["complete", "invalid"], 3),
    (["invalid", "not started"], 3),
    (["invalid", "partial"], 1),
])
def test_a_stop_at_the_deadline_is_its_own_exit_status_and_a_failure_outweighs_it(states, status):
    """A campaign must tell "the time was up" (rerun later: EX_TEMPFAIL, 75) and "the machine
    disturbed every attempt" (3) from "something failed" (1): a stopped command used to exit 1
    like a broken one, and so did one whose repetitions the host's steal voided."""
    from sojourn.runner.experiment import Outcome, combined_status

    outcome = Outcome(Path("."), {("run", rep): state for rep, state in enumerate(states)})
    assert outcome.status == status
    assert combined_status(0, outcome.status) == combined_status(outcome.status, 0) == status
    assert combined_status(75, 1) == combined_status(1, 75) == 1 and combined_status(2, 1) == 2
    assert combined_status(75, 3) == combined_status(3, 75) == 3 and combined_status(3, 1) == 1


@pytest.mark.skipif(os.geteuid() != 0, reason="sojourn run needs root")
def test_sojourn_run_stopped_before_any_repetition_says_so_and_exits_75(tmp_path):
    """`sojourn run --stop-after 0` ran nothing: no summary of no results (it raised
    FileNotFoundError), the count of what is left and the status that says rerun later."""
    path = tmp_path / "late.toml"
    path.write_text('name = "late"\nrepetitions = 2\n[workload]\nrho = 0.5\n')
    done = subprocess.run([sys.executable, "-m", "sojourn.cli", "run", str(path), "--results", str(tmp_path / "r"),
                           "--stop-after", "0", "--no-report"], capture_output=True, text=True)
    assert done.returncode == 75, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "2 repetition(s) not started before --stop-after's deadline" in " ".join(done.stdout.split())


def test_a_campaign_goes_on_past_a_command_stopped_by_its_deadline(tmp_path):
    """scripts/campaign.sh: exit 75 (out of time) and 3 (left invalid) are reported and are no
    failure; exit 1 is, and outweighs 3."""
    script = str(REPO / "scripts" / "campaign.sh")
    stopped = subprocess.run([script, "5", f"{sys.executable} -c exit(75)", f"{sys.executable} -c exit(0)"],
                             capture_output=True, text=True, cwd=tmp_path)
    assert stopped.returncode == 0 and "campaign: out of time in:" in stopped.stdout
    failed = subprocess.run([script, "5", f"{sys.executable} -c exit(1)", f"{sys.executable} -c exit(75)"],
                            capture_output=True, text=True, cwd=tmp_path)
    assert failed.returncode == 1 and "campaign: exit 1 from:" in failed.stdout
    voided = subprocess.run([script, "5", f"{sys.executable} -c exit(3)", f"{sys.executable} -c exit(0)"],
                            capture_output=True, text=True, cwd=tmp_path)
    assert voided.returncode == 3 and "campaign: repetitions left invalid" in voided.stdout
    worse = subprocess.run([script, "5", f"{sys.executable} -c exit(3)", f"{sys.executable} -c exit(1)"],
                           capture_output=True, text=True, cwd=tmp_path)
    assert worse.returncode == 1


def test_a_spec_given_a_new_variant_keeps_what_the_others_ran(tmp_path):
    """Complete results pin a run's configuration, not the spec's text: adding a variant
    keeps the repetitions of the others (and the new text takes the old one's place);
    changing a run that ran is refused, naming it."""
    import time

    from sojourn.runner import layout
    from sojourn.runner.experiment import NOT_STARTED, ResultsConflict, run_experiment

    path = tmp_path / "g.toml"
    path.write_text('name = "g"\n[workload]\nrho = 0.5\n[variants.a]\nserver.policy = "fair"\n')
    first = load_spec(path)
    ran = tmp_path / "results" / "g" / "a" / "0"
    ran.mkdir(parents=True)
    layout.mark(ran, "complete")
    layout.write_json(ran / "run.json", {"run": "a", "config": first.runs[0].config})
    (tmp_path / "results" / "g" / "spec.toml").write_text(first.text)
    path.write_text(path.read_text() + '[variants.b]\nserver.policy = "srpt"\n')
    outcome = run_experiment(load_spec(path), tmp_path / "results", stop_at=time.time() - 1)
    assert outcome.states == {("a", 0): "complete", ("b", 0): NOT_STARTED}
    assert (tmp_path / "results" / "g" / "spec.toml").read_text() == path.read_text()
    path.write_text(path.read_text().replace("rho = 0.5", "rho = 0.6"))
    with pytest.raises(ResultsConflict, match=r"a rep 0 ran with another configuration"):
        run_experiment(load_spec(path), tmp_path / "results", stop_at=time.time() - 1)


def test_the_progress_names_each_point_left_unstarted(tmp_path):
    """After --stop-after, each repetition left is told by its own run and repetition, not by
    the label of the last one that ran."""
    import io
    import time

    from rich.console import Console

    from sojourn.runner.cli import run_with_progress

    experiment = validate({"name": "late", "repetitions": 2, "workload": {"rho": 0.5},
                           "variants": {"fair": {}, "srpt": {"server": {"policy": "srpt"}}}})
    out = io.StringIO()
    outcome, status = run_with_progress(Console(file=out, width=200), experiment, tmp_path, "sjt",
                                        stop_at=time.time() - 1)
    told = [line.strip() for line in out.getvalue().splitlines() if "not started" in line]
    assert status == 0 and not outcome.complete
    assert told == [f"{run} rep {rep}: not started" for rep in (0, 1) for run in ("fair", "srpt")]
