"""Publishing: one result directory's repetitions, derived (:mod:`sojourn.overload.derive`)
into docs/overload-control/<experiment>/<run>/<rep>.json, and each run's trace replayed by
the simulator with the run's config (:mod:`sojourn.overload.simulate`) into
<run>/model.json, replacing what was published of that experiment at once (a staging
directory renamed into place), so the doc never reads half a publication. Repetitions that
did not complete are left out, and named.

Beside the numbers go what a later checkout needs to resume the campaign without running
them again (results/ is not kept between checkouts, docs/ is): the spec as run, meta.json
(its scale) and each repetition's small runner files under <run>/<rep>/, the form
:func:`sojourn.reproduce.publish.restore_published` puts back under results/. A repetition
restored that way has no per-request records, so its numbers are carried over from the
publication it came from instead of derived again."""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

from sojourn.overload import PUBLISHED, experiment_named
from sojourn.overload.derive import derive
from sojourn.overload.simulate import simulate
from sojourn.reproduce.publish import RESTORED

# Per repetition, what the runner needs to keep it as complete, and the guard's verdict; not
# the counters' time series (hundreds of kB a 10-minute repetition), which the doc never reads.
RUNNER_FILES = ("run.json", "status.json", "summary.json", "fidelity.json", "attempts.json")


def publish(results: str | Path, published: Path = PUBLISHED) -> Path:
    """Publishes results/<name> (a directory `sojourn run` wrote); returns where it went."""
    results = Path(results)
    if not (results / "spec.toml").is_file():
        raise FileNotFoundError(f"{results}: not a result directory of `sojourn run` (no spec.toml)")
    experiment_named(results.name.removesuffix("-quick"))  # refuses other experiments' results
    destination = published / results.name
    staging = destination.with_name(f".{destination.name}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        for status in sorted(results.glob("*/*/status.json")):
            rep = status.parent
            if json.loads(status.read_text()).get("state") != "complete":
                print(f"{rep}: not complete, left out", file=sys.stderr)
                continue
            run = rep.parent.name
            out = staging / run / f"{rep.name}.json"
            restored = (rep / RESTORED).is_file()
            before = destination / run / f"{rep.name}.json"
            if restored and not before.is_file():
                print(f"{rep}: restored from a publication that has no numbers for it, left out", file=sys.stderr)
                continue
            out.parent.mkdir(parents=True, exist_ok=True)
            if restored:
                shutil.copy2(before, out)
            else:
                out.write_text(json.dumps(derive(rep), indent=1) + "\n")
            (staging / run / rep.name).mkdir()
            for name in RUNNER_FILES:
                if (rep / name).is_file():
                    shutil.copy2(rep / name, staging / run / rep.name / name)
            model = out.parent / "model.json"
            if model.exists():
                continue  # one replay a run: its repetitions share the trace and the config
            if restored:
                if (destination / run / "model.json").is_file():
                    shutil.copy2(destination / run / "model.json", model)
            elif (numbers := simulate(rep)) is not None:
                model.write_text(json.dumps(numbers, indent=1) + "\n")
        if not staging.is_dir():
            raise ValueError(f"{results}: no complete repetition to publish")
        shutil.copy2(results / "spec.toml", staging / "spec.toml")
        meta = {"experiment": results.name, "scale": "quick" if results.name.endswith("-quick") else "full",
                "published": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        (staging / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    shutil.rmtree(destination, ignore_errors=True)
    staging.rename(destination)
    return destination
