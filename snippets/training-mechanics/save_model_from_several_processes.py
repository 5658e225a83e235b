# Saving a model from several processes with Accelerate: every rank calls the save, one rank writes,
# and a barrier, not the save itself, makes the file safe to read.
#   1. accelerator.save(obj, path), called on every rank, writes on the main process only.
#      Negative control: torch.save on every rank (one file per rank, or one file written N times).
#   2. accelerator.save_model(prepared_model, dir) writes the unwrapped weights: they load into a plain,
#      never-prepared model with strict=True. Negative control: torch.save(prepared.state_dict()), the
#      DDP wrapper's keys ("module.0.weight"), which a plain model does not accept.
#   3. save_model writes the weights only; save_state writes what a resume needs.
#      Negative control: save_state on the same prepared objects.
#   4. save_model has no barrier inside: a rank that reads right after its own save_model call finds
#      nothing unless accelerator.wait_for_everyone() sits between the save and the read.
#      To make the race deterministic the main process is made as slow as possible: it starts writing
#      only once every other rank has reached the line after its save_model call (or, if one is still inside
#      save_model 0.5 s after entering it, i.e. waiting there for the main process, right then).
#      Negative control: the same save and read without wait_for_everyone().
#
#   ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes 2 snippets/training-mechanics/save_model_from_several_processes.py
import glob
import os
import tempfile
import time

import torch
from accelerate import Accelerator
from accelerate.utils import broadcast_object_list, gather_object, set_seed
from safetensors.torch import load_file

import _claims


def build():
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))


accelerator = Accelerator()
set_seed(0)
model = build()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)  # model is now DDP

# One training step, so the saved weights are not the initial ones a fresh build() could also give.
x, y = torch.randn(16, 8), torch.randn(16, 1)
accelerator.backward(torch.nn.functional.mse_loss(model(x), y))
optimizer.step()
scheduler.step()
optimizer.zero_grad()
trained = {k: v.detach().clone() for k, v in accelerator.unwrap_model(model).state_dict().items()}
rank, world = accelerator.process_index, accelerator.num_processes


GRACE = 0.5  # seconds: a non-main rank's save_model returns in ~1-10 ms here


def strict_load_mismatches(state_dict):
    """Missing + unexpected keys when a plain, never-prepared model loads this state dict."""
    result = build().load_state_dict(state_dict, strict=False)
    return len(result.missing_keys) + len(result.unexpected_keys)


def save_then_read(folder, barrier):
    """Every rank calls save_model; the main process writes last. How many ranks then find the file?"""
    flag = os.path.join(os.path.dirname(folder), f"{{}}-{os.path.basename(folder)}-{{}}")  # (event, rank)
    if accelerator.is_main_process:
        # The slowest main process possible: it writes only when every other rank has reached the line
        # after its own save_model call. A non-main rank's save_model takes milliseconds (nothing to write);
        # one still inside it GRACE seconds after entering it is taken to be waiting for the main process
        # (a barrier inside save_model), and the main process then writes, so the run cannot hang.
        others = range(1, world)
        deadline, all_entered = time.monotonic() + 5, None  # 5 s: in case a rank never reaches its save_model
        while not all(os.path.exists(flag.format("arrived", r)) for r in others) and time.monotonic() < deadline:
            if all_entered is None and all(os.path.exists(flag.format("entered", r)) for r in others):
                all_entered = time.monotonic()
            if all_entered is not None and time.monotonic() - all_entered > GRACE:
                break  # still inside save_model: it waits for this process
            time.sleep(0.005)
        returned_first = all(os.path.exists(flag.format("arrived", r)) for r in others)
        accelerator.save_model(model, folder)
        inside = None
    else:
        returned_first = None
        open(flag.format("entered", rank), "w").close()
        started = time.monotonic()
        accelerator.save_model(model, folder)  # on rank 1: no file is written, and nothing waits
        inside = time.monotonic() - started  # seconds this non-main rank spent inside save_model
        open(flag.format("arrived", rank), "w").close()
    if barrier:
        accelerator.wait_for_everyone()  # <- the line that makes the read safe
    found = os.path.exists(os.path.join(folder, "model.safetensors"))
    folder_there = os.path.isdir(folder)  # save_model makes the folder on every rank before the main one writes
    accelerator.wait_for_everyone()  # after the read: the next scenario starts together
    returned_first = broadcast_object_list([returned_first])[0]  # did the main process write after they returned?
    seconds_inside = [t for t in gather_object([inside]) if t is not None]
    return sum(gather_object([found])), sum(gather_object([folder_there])), returned_first, seconds_inside


with tempfile.TemporaryDirectory() as own_dir:
    shared = broadcast_object_list([own_dir])[0]  # rank 0's folder on every rank (a shared disk across machines)

    # 1. Every rank calls the save, each with its own file name so that the writers can be counted.
    unwrapped_weights = accelerator.unwrap_model(model).state_dict()
    accelerator.save(unwrapped_weights, os.path.join(shared, f"accelerate_save_rank{rank}.pt"))
    torch.save(unwrapped_weights, os.path.join(shared, f"torch_save_rank{rank}.pt"))
    accelerator.wait_for_everyone()
    _claims.equal(
        "accelerator_save_writes_on_main_only",
        measured=len(glob.glob(os.path.join(shared, "accelerate_save_rank*.pt"))),
        control=len(glob.glob(os.path.join(shared, "torch_save_rank*.pt"))),
        expected=1,
        processes=world,
    )

    # 2. save_model on every rank, then load into a plain model; the control saves the wrapper's dict.
    accelerator.save_model(model, os.path.join(shared, "export"))
    if accelerator.is_main_process:
        torch.save(model.state_dict(), os.path.join(shared, "wrapper_state_dict.pt"))
    accelerator.wait_for_everyone()
    exported = load_file(os.path.join(shared, "export", "model.safetensors"))
    wrapper_dict = torch.load(os.path.join(shared, "wrapper_state_dict.pt"), weights_only=True)
    _claims.equal(
        "save_model_loads_into_plain_model",
        measured=strict_load_mismatches(exported),
        control=strict_load_mismatches(wrapper_dict),
        expected=0,
        exported_keys=sorted(exported),
        wrapper_keys=sorted(wrapper_dict),
        max_diff_to_trained_weights=max((exported[k] - trained[k]).abs().max().item() for k in trained),
    )

    # 3. What lands in the folder: save_model against save_state, same prepared objects.
    accelerator.save_state(os.path.join(shared, "state"))
    accelerator.wait_for_everyone()  # save_state(dir) has no barrier of its own either
    _claims.equal(
        "save_model_writes_weights_only",
        measured=sorted(os.listdir(os.path.join(shared, "export"))),
        control=sorted(os.listdir(os.path.join(shared, "state"))),
        expected=["model.safetensors"],
    )

    # 4. The read right after the save, with and without the barrier.
    with_barrier, _, returned_first_with, inside_with = save_then_read(os.path.join(shared, "with_barrier"), barrier=True)
    without_barrier, folders_without_barrier, returned_first_without, inside_without = save_then_read(
        os.path.join(shared, "without_barrier"), barrier=False
    )
    _claims.equal(
        "wait_for_everyone_makes_the_file_readable",
        measured=with_barrier,  # ranks that found model.safetensors right after the save
        control=without_barrier,
        expected=world,
        ranks_that_saw_the_folder_without_barrier=folders_without_barrier,
        other_ranks_returned_before_the_write=[returned_first_with, returned_first_without],  # False: save_model held them
        non_main_seconds_inside_save_model=[round(t, 4) for t in inside_with + inside_without],
    )
    accelerator.wait_for_everyone()  # rank 0 deletes the folder when it leaves this block
