"""The M/G/1 model of `sojourn-engine sim` written in simpy, the peer of bench/sim.

Poisson arrivals, exponential sizes (mean 1 = one time unit of service), one server
under SRPT (simpy's PreemptiveResource, priority = remaining work, re-requested after
each preemption) or PS (a server process that is interrupted at each arrival and
shares its rate equally; O(n) per event, the natural simpy formulation).

    python bench/sim/mg1_simpy.py --policy srpt --rho 0.9 --jobs 200000
prints one JSON line: jobs, seconds (wall), cpu_seconds, jobs_per_s, jobs_per_cpu_s, mean_response.
"""

from __future__ import annotations

import argparse
import json
import random
import time

import simpy


def srpt(env, jobs, rho, rng, responses, finished):
    server = simpy.PreemptiveResource(env, capacity=1)

    def job(size: float):
        arrival, remaining = env.now, size
        while remaining > 1e-12:
            with server.request(priority=remaining) as request:
                started = None
                try:
                    yield request
                    started = env.now
                    yield env.timeout(remaining)
                    remaining = 0.0
                except simpy.Interrupt:  # preempted by a job with less work left
                    if started is not None:
                        remaining -= env.now - started
        responses.append(env.now - arrival)
        if len(responses) == jobs:
            finished.succeed()

    def source():
        for _ in range(jobs):
            yield env.timeout(rng.expovariate(rho))
            env.process(job(rng.expovariate(1.0)))

    env.process(source())


def ps(env, jobs, rho, rng, responses, finished):
    present: dict[int, list[float]] = {}  # id -> [arrival, remaining]

    def server():
        while True:
            last = env.now
            if present:
                n = len(present)
                shortest = min(r for _, r in present.values())
                try:
                    yield env.timeout(shortest * n)
                except simpy.Interrupt:
                    pass
            else:
                try:
                    yield env.timeout(float("inf"))
                except simpy.Interrupt:
                    pass
            if present:
                served = (env.now - last) / len(present)
                for key in list(present):
                    present[key][1] -= served
                    if present[key][1] <= 1e-9:
                        responses.append(env.now - present.pop(key)[0])
                if len(responses) == jobs:
                    finished.succeed()
                    return

    process = env.process(server())

    def source():
        for i in range(jobs):
            yield env.timeout(rng.expovariate(rho))
            # settle the work done so far before the new job joins
            process.interrupt()
            yield env.timeout(0)
            present[i] = [env.now, rng.expovariate(1.0)]
            process.interrupt()

    env.process(source())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policy", choices=("srpt", "ps"), required=True)
    parser.add_argument("--rho", type=float, default=0.9)
    parser.add_argument("--jobs", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    env, responses = simpy.Environment(), []
    finished = env.event()
    started, cpu_started = time.perf_counter(), time.process_time()
    {"srpt": srpt, "ps": ps}[args.policy](env, args.jobs, args.rho, random.Random(args.seed), responses, finished)
    env.run(until=finished)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    print(json.dumps({"policy": args.policy, "jobs": len(responses), "seconds": seconds, "cpu_seconds": cpu,
                      "jobs_per_s": len(responses) / seconds, "jobs_per_cpu_s": len(responses) / cpu,
                      "mean_response": sum(responses) / len(responses)}))


if __name__ == "__main__":
    main()
