# How often should a long job checkpoint? A failure simulation with a fixed seed: work runs in segments
# of tau minutes, each followed by a checkpoint of delta minutes; failures arrive as a Poisson process
# with mean time between failures M (they can strike during work, checkpoints and restarts); after a
# failure the job restarts (R minutes) and redoes the segment since the last checkpoint. The simulated
# wall time is minimised near Young's sqrt(2 delta M) when delta << M, and near Daly's higher-order
# optimum when it is not. Negative control: the same simulation at intervals far from the optimum.
# Measured on 2 ranks: what accelerator.save_state writes (the checkpoint's size, which sets delta).
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 --main_process_port 0 snippets/failures/checkpoint_interval_simulation.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import math
import os
import tempfile
import time

import numpy as np
import torch
from accelerate import Accelerator
from accelerate.utils import broadcast_object_list

import _claims

accelerator = Accelerator()
SEGMENTS = 10_000  # simulated segments per interval, the same seed for every interval


def wall_time_per_work(tau, delta, mtbf, restart, rng):
    """Mean wall-clock minutes per minute of useful work, checkpointing every `tau` minutes of work."""
    total = np.zeros(SEGMENTS)
    pending = np.ones(SEGMENTS, dtype=bool)  # segments not yet checkpointed
    while pending.any():
        index = np.flatnonzero(pending)
        failure = rng.exponential(mtbf, index.size)
        done = failure >= tau + delta
        total[index[done]] += tau + delta
        failed = index[~done]
        total[failed] += failure[~done]
        restarting = failed
        while restarting.size:  # a restart only counts when it finishes before the next failure
            failure = rng.exponential(mtbf, restarting.size)
            ok = failure >= restart
            total[restarting[ok]] += restart
            total[restarting[~ok]] += failure[~ok]
            restarting = restarting[~ok]
        pending[index[done]] = False
    return total.mean() / tau


def simulated_curve(delta, mtbf, restart, taus):
    """Waste (wall time per work minus 1) for each interval, with the same seed for every interval."""
    return np.array([wall_time_per_work(tau, delta, mtbf, restart, np.random.default_rng(0)) - 1 for tau in taus])


def young(delta, mtbf):
    return math.sqrt(2 * delta * mtbf)


def fitted_optimum(delta, mtbf, restart, taus):
    """The interval minimising a parabola fitted to the simulated waste against log(tau): the curve is flat at
    its minimum, so the fit is steadier than the grid's argmin; a curve with no minimum gives its grid argmin."""
    waste = simulated_curve(delta, mtbf, restart, taus)
    curvature, slope, _ = np.polyfit(np.log(taus), waste, 2)
    return float(np.exp(-slope / (2 * curvature))) if curvature > 0 else float(taus[waste.argmin()])


# Daly (2006) simulated three systems with R = 10 min and delta = 5 min, and published his model's optimum.
DALY_CASES = {"M = 24 h": (1440.0, 117.0), "M = 6 h": (360.0, 57.0), "M = 15 min": (15.0, 9.1)}
DELTA, RESTART = 5.0, 10.0


def optima(case_names, delta):
    """Each case's fitted optimum, the grid centred on Young's interval for delta = 5 min."""
    found = {}
    for name in case_names:
        mtbf = DALY_CASES[name][0]
        found[name] = fitted_optimum(delta, mtbf, RESTART, np.geomspace(young(DELTA, mtbf) / 2, young(DELTA, mtbf) * 2, 21))
    return found


def on_every_rank(compute):
    """Split the cases over the ranks and give every rank all the results (each case has its own seed)."""
    names = list(DALY_CASES)[accelerator.process_index :: accelerator.num_processes]
    gathered = [None] * accelerator.num_processes
    torch.distributed.all_gather_object(gathered, compute(names))
    return {name: value for part in gathered for name, value in part.items()}


optimum = on_every_rank(lambda names: optima(names, DELTA))
free_checkpoint_optimum = on_every_rank(lambda names: optima(names, 0.0))  # the control: checkpoints cost nothing

# Modelled: with delta << M (24 h), checkpointing every sqrt(2 delta M) wastes within 0.3 points of the best interval.
best_waste = simulated_curve(DELTA, 1440.0, RESTART, [optimum["M = 24 h"]])[0]
young_waste = simulated_curve(DELTA, 1440.0, RESTART, [young(DELTA, 1440.0)])[0]
far = simulated_curve(DELTA, 1440.0, RESTART, [young(DELTA, 1440.0) / 8, young(DELTA, 1440.0) * 8])
_claims.at_most(
    "young_interval_wastes_near_the_minimum",
    measured=abs(young_waste - best_waste),
    control=float(far.min() - best_waste),
    tolerance=0.003,
    young_minutes=young(DELTA, 1440.0),
    waste_at_young=young_waste,
    waste_at_fitted_optimum=best_waste,
    fitted_optimum_minutes=optimum["M = 24 h"],
    waste_at_young_over_8=far[0],
    waste_at_young_times_8=far[1],
)

# Modelled, anchored: the simulated optimum against the optima Daly published for his simulated systems.
def worst_error(found):
    return max(abs(found[name] / daly - 1) for name, (_, daly) in DALY_CASES.items())


_claims.at_most(
    "simulated_optimum_matches_daly",
    measured=worst_error(optimum),
    control=worst_error(free_checkpoint_optimum),
    tolerance=0.10,
    simulated_optimum_minutes=optimum,
    free_checkpoint_optimum_minutes=free_checkpoint_optimum,
    daly_optimum_minutes={name: daly for name, (_, daly) in DALY_CASES.items()},
)

# Modelled: Young's formula is first order in delta / M: far off when the checkpoint costs a third of the MTBF.
def young_error(name):
    return abs(optimum[name] / young(DELTA, DALY_CASES[name][0]) - 1)


_claims.at_least(
    "young_is_off_when_checkpoints_are_slow",
    measured=young_error("M = 15 min"),
    control=young_error("M = 24 h"),  # the same comparison where the checkpoint is 0.3% of the MTBF
    bound=0.2,
    young_minutes={name: young(DELTA, mtbf) for name, (mtbf, _) in DALY_CASES.items()},
    relative_error={name: young_error(name) for name in DALY_CASES},
)


# Measured: what a checkpoint of a training state holds, which is what sets its cost delta.
def checkpoint_bytes(optimizer_class, **options):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256))
    optimizer = optimizer_class(model.parameters(), lr=1e-3, **options)
    model, optimizer = accelerator.prepare(model, optimizer)
    accelerator.backward(model(torch.randn(8, 256)).square().mean())
    optimizer.step()
    folder = broadcast_object_list([tempfile.mkdtemp(prefix="ckpt-") if accelerator.is_main_process else None])[0]
    accelerator.wait_for_everyone()
    start = time.perf_counter()
    accelerator.save_state(folder)
    accelerator.wait_for_everyone()
    seconds = time.perf_counter() - start
    files = {name: os.path.getsize(os.path.join(folder, name)) for name in sorted(os.listdir(folder))}
    parameter_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    accelerator.free_memory()
    return sum(files.values()) / parameter_bytes, seconds, files, parameter_bytes


adam_ratio, adam_seconds, adam_files, parameter_bytes = checkpoint_bytes(torch.optim.AdamW)
sgd_ratio, sgd_seconds, sgd_files, _ = checkpoint_bytes(torch.optim.SGD)
_claims.between(
    "adam_checkpoint_is_three_times_the_weights",
    measured=adam_ratio,
    control=sgd_ratio,  # the same model and save_state with plain SGD, which keeps no per-parameter state
    low=2.9,
    high=3.2,
    parameter_bytes=parameter_bytes,
    adam_files=adam_files,
    sgd_files=sgd_files,
    adam_save_state_seconds=adam_seconds,
    sgd_save_state_seconds=sgd_seconds,
)
