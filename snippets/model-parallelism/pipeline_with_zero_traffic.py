# Why DeepSpeed allows only ZeRO-1 with pipeline parallelism: a pipeline step is m micro-batches of gradient
# accumulation, and DeepSpeed's pipeline schedule reduces the gradients once, after the last backward. ZeRO-1
# fits that: each rank accumulates its stage's full gradient and reduce-scatters it once. ZeRO-2 keeps only a
# gradient partition, so every micro-batch's backward must reduce-scatter (m times); ZeRO-3 also all-gathers
# the parameters before every forward and every backward. The model walks a GPipe schedule of m micro-batches
# for one data-parallel rank of one stage and adds up the collective bytes each stage of ZeRO issues, with the
# ring costs (N-1)/N * bytes for a reduce-scatter or an all-gather over N data-parallel ranks.
# Negative controls: the ZeRO-2 walk with its gradients kept whole and reduced once per step; the ZeRO-3 walk
# with one micro-batch per step; the ZeRO-2 comparison at 16 micro-batches.
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 --main_process_port 0 snippets/model-parallelism/pipeline_with_zero_traffic.py
#   (ACCELERATE_USE_CPU=true only on a machine without GPUs)
import _claims


def step_traffic(zero_stage, micro_batches, stage_parameters, data_parallel, bytes_per_value=2, keep_full_gradients=False):
    """(bytes one rank sends per optimizer step, collectives it issues) for one pipeline stage.
    keep_full_gradients: ZeRO-2/3 with the gradient partitioning removed (full gradients held until the step)."""
    reduce_per_micro_batch = zero_stage >= 2 and not keep_full_gradients
    ring = (data_parallel - 1) / data_parallel * stage_parameters * bytes_per_value  # one RS or one AG
    collectives = []
    for _ in range(micro_batches):  # forwards of the m micro-batches (GPipe order; 1F1B issues the same set)
        if zero_stage == 3:
            collectives.append("all-gather parameters (forward)")
    for _ in range(micro_batches):  # backwards
        if zero_stage == 3:
            collectives.append("all-gather parameters (backward)")
        if reduce_per_micro_batch:
            collectives.append("reduce-scatter this micro-batch's gradients")  # only a partition may stay
    if not reduce_per_micro_batch:  # DeepSpeed's ReduceGrads after the last backward: the accumulated gradient, once
        collectives.append("reduce-scatter the accumulated gradients")
    if zero_stage <= 2:  # after the partitioned optimizer step, the updated parameters are gathered again
        collectives.append("all-gather updated parameters")
    return ring * len(collectives), collectives


# GPT-3 175B in 8 pipeline stages (about 21.9B parameters each), fp16 gradients, 8-way data parallelism,
# 16 micro-batches per step.
shape = dict(micro_batches=16, stage_parameters=175e9 / 8, data_parallel=8)
small = dict(micro_batches=1, stage_parameters=175e9 / 8, data_parallel=8)
zero1, zero1_calls = step_traffic(1, **shape)
zero2, zero2_calls = step_traffic(2, **shape)
zero3, zero3_calls = step_traffic(3, **shape)
_claims.at_least(
    "zero2_traffic_grows_with_micro_batches",
    measured=zero2 / zero1,
    control=step_traffic(2, **shape, keep_full_gradients=True)[0] / zero1,  # ZeRO-2 reducing once per step
    bound=8.0,
    gigabytes_per_step={"zero1": zero1 / 1e9, "zero2": zero2 / 1e9, "zero3": zero3 / 1e9},
    collectives_per_step={"zero1": len(zero1_calls), "zero2": len(zero2_calls), "zero3": len(zero3_calls)},
)
_claims.at_least(
    "zero3_traffic_is_three_per_micro_batch",
    measured=zero3 / zero1,
    control=step_traffic(3, **small)[0] / step_traffic(1, **small)[0],  # the same walk with one micro-batch per step
    bound=20.0,
)
_claims.at_most(
    "one_micro_batch_costs_the_same",
    measured=abs(step_traffic(2, **small)[0] / step_traffic(1, **small)[0] - 1),
    control=abs(zero2 / zero1 - 1),  # the same comparison at 16 micro-batches
    tolerance=1e-9,
)
