"""Publishing: one result directory's repetitions, derived (:mod:`sojourn.overload.derive`)
into docs/overload-control/<experiment>/<run>/<rep>.json, and each run's trace replayed by
the simulator with the run's config (:mod:`sojourn.overload.simulate`) into
<run>/model.json, replacing what was published of that experiment at once (a staging
directory renamed into place), so the doc never reads half a publication. Repetitions that
did not complete are left out, and named."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from sojourn.overload import PUBLISHED, experiment_named
from sojourn.overload.derive import derive
from sojourn.overload.simulate import simulate


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
            out = staging / rep.parent.name / f"{rep.name}.json"
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(derive(rep), indent=1) + "\n")
            model = out.parent / "model.json"
            if not model.exists() and (numbers := simulate(rep)) is not None:
                # One replay a run: its repetitions share the trace and the config.
                model.write_text(json.dumps(numbers, indent=1) + "\n")
        if not staging.is_dir():
            raise ValueError(f"{results}: no complete repetition to publish")
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    shutil.rmtree(destination, ignore_errors=True)
    staging.rename(destination)
    return destination
