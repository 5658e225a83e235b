"""Mutants for data-and-evaluation: the library bugs that the wrong answers on these pages describe.

Sharding, padding and gathering done the way a wrong answer says they are (samples dealt like a
DistributedSampler, gather_for_metrics no better than gather, no padding), applied in every rank for one
run of a snippet. The forked children of a proof inherit the patch.
"""
from verify.mutation import mutant


def _reached_in_forked_children(patch):
    """Some proofs run their collectives in forked children, whose memory the rank never sees: a shared
    flag set by the mutated code in a child is read back each time the rank joins a child."""
    import multiprocessing
    import multiprocessing.process

    flag = multiprocessing.get_context("fork").RawValue("i", 0)
    original_join = multiprocessing.process.BaseProcess.join

    class Join:  # a descriptor, not a plain function: calling it records nothing by itself
        def __get__(self, instance, owner):
            def join(timeout=None):
                result = original_join(instance, timeout)
                if flag.value:
                    patch.ran()
                return result

            return join

    patch.replace(multiprocessing.process.BaseProcess, "join", Join())

    def mark():
        flag.value = 1
        patch.ran()

    return mark


def _dataloader_configuration_default(patch, name, value, only_if=None):
    """DataLoaderConfiguration with another value for `name` (when not given, or when given as `only_if`)."""
    from accelerate.utils import DataLoaderConfiguration

    def init(original, self, *args, **kwargs):
        if (only_if is None and name not in kwargs) or (only_if is not None and kwargs.get(name) is only_if):
            kwargs[name] = value
        return original(self, *args, **kwargs)

    patch.wrap(DataLoaderConfiguration, "__init__", init)


@mutant("prepare-does-not-shard-dataloader",
        "accelerator.prepare returns the DataLoader unchanged: every rank iterates the whole dataset")
def prepare_does_not_shard_dataloader(patch):
    from accelerate import Accelerator

    patch.wrap(Accelerator, "prepare_data_loader", lambda original, self, data_loader, *args, **kwargs: data_loader)


@mutant("prepare-deals-samples-like-distributed-sampler",
        "prepare() puts a DistributedSampler under the loader: sample i to rank i % N, not whole batches")
def prepare_deals_samples_like_distributed_sampler(patch):
    from accelerate import Accelerator
    from torch.utils.data import DataLoader, IterableDataset
    from torch.utils.data.distributed import DistributedSampler

    def prepare_data_loader(original, self, data_loader, *args, **kwargs):
        config = self.dataloader_config
        if isinstance(data_loader.dataset, IterableDataset) or config.split_batches or config.dispatch_batches:
            return original(self, data_loader, *args, **kwargs)
        sampler = DistributedSampler(data_loader.dataset, shuffle=False)
        return DataLoader(data_loader.dataset, batch_size=data_loader.batch_size, sampler=sampler)

    patch.wrap(Accelerator, "prepare_data_loader", prepare_data_loader)


@mutant("split-batches-by-default",
        "split_batches defaults to True: each batch is cut into N slices, batch_size is the global batch")
def split_batches_by_default(patch):
    _dataloader_configuration_default(patch, "split_batches", True)


@mutant("iterable-dataset-not-dispatched-by-default",
        "an IterableDataset is not dispatched by default: every rank reads the stream itself")
def iterable_dataset_not_dispatched_by_default(patch):
    _dataloader_configuration_default(patch, "dispatch_batches", False)


@mutant("even-batches-off-by-default",
        "even_batches defaults to False: the last round is not padded, ranks take different step counts")
def even_batches_off_by_default(patch):
    _dataloader_configuration_default(patch, "even_batches", False)


@mutant("even-batches-false-ignored",
        "even_batches=False is ignored: the last round is padded with samples from the start anyway")
def even_batches_false_ignored(patch):
    _dataloader_configuration_default(patch, "even_batches", True, only_if=False)


@mutant("pad-across-processes-pads-nothing",
        "pad_across_processes returns each rank's tensor as it is, without padding it to the longest")
def pad_across_processes_pads_nothing(patch):
    import accelerate.accelerator as accelerator_module

    patch.replace(accelerator_module, "pad_across_processes",
                  lambda tensor, dim=0, pad_index=0, pad_first=False: tensor)


@mutant("pad-across-processes-ignores-dim",
        "pad_across_processes always pads dimension 0, whatever dim it is given")
def pad_across_processes_ignores_dim(patch):
    import accelerate.accelerator as accelerator_module

    original = accelerator_module.pad_across_processes

    def pad_across_processes(tensor, dim=0, pad_index=0, pad_first=False):
        return original(tensor, dim=0, pad_index=pad_index, pad_first=pad_first)

    patch.replace(accelerator_module, "pad_across_processes", pad_across_processes)


@mutant("pad-index-defaults-to-minus-100",
        "Accelerator.pad_across_processes pads with -100 (the label-ignore index) unless given a pad_index")
def pad_index_defaults_to_minus_100(patch):
    from accelerate import Accelerator

    def pad_across_processes(original, self, tensor, dim=0, pad_index=-100, pad_first=False):
        return original(self, tensor, dim=dim, pad_index=pad_index, pad_first=pad_first)

    patch.wrap(Accelerator, "pad_across_processes", pad_across_processes)


@mutant("split-between-processes-duplicates",
        "split_between_processes gives every rank all the inputs instead of its own chunk")
def split_between_processes_duplicates(patch):
    from contextlib import contextmanager

    from accelerate import PartialState

    @contextmanager
    def split_between_processes(self, inputs, apply_padding=False):
        yield inputs

    patch.replace(PartialState, "split_between_processes", split_between_processes)


@mutant("split-between-processes-strided",
        "split_between_processes deals input i to rank i % N (round-robin) instead of contiguous chunks")
def split_between_processes_strided(patch):
    from contextlib import contextmanager

    import torch
    from accelerate import PartialState

    @contextmanager
    def split_between_processes(self, inputs, apply_padding=False):
        mine = inputs[self.process_index :: self.num_processes]
        longest = -(-len(inputs) // self.num_processes)
        if apply_padding and len(mine) < longest:
            last = inputs[-1:]
            mine = torch.cat([mine, last]) if isinstance(mine, torch.Tensor) else list(mine) + list(last)
        yield mine

    patch.replace(PartialState, "split_between_processes", split_between_processes)


@mutant("join-uneven-inputs-acts-on-cpu",
        "join_uneven_inputs takes its multi-GPU branch on a multi-CPU run too (overrides even_batches, enters Join)")
def join_uneven_inputs_acts_on_cpu(patch):
    import sys

    from accelerate import Accelerator
    from accelerate.utils import DistributedType

    multi_device = Accelerator.multi_device

    def getter(self):
        if sys._getframe(1).f_code.co_name == "join_uneven_inputs" and self.distributed_type == DistributedType.MULTI_CPU:
            patch.ran()
            return True
        return multi_device.fget(self)

    patch.replace(Accelerator, "multi_device", property(getter))


@mutant("join-does-not-shadow-collectives",
        "torch's Join lets a rank that ran out of inputs leave at once, shadowing none of the others' all-reduces "
        "(in forked processes only: in the launched ranks the same bug would hang the harness's own group)")
def join_does_not_shadow_collectives(patch):
    import os

    from torch.distributed.algorithms import Join

    mark = _reached_in_forked_children(patch)
    original_exit = Join.__exit__
    launched = os.getpid()

    class Exit:  # a descriptor, so that only mark() records that it ran
        def __get__(self, instance, owner):
            def exit_(type_, value, traceback):
                if type_ is None and instance._enable and os.getpid() != launched:
                    mark()
                    return None  # leave without running the join hooks
                return original_exit(instance, type_, value, traceback)

            return exit_

    patch.replace(Join, "__exit__", Exit())


@mutant("dispatch-batches-every-rank-gets-rank0-slice",
        "every rank is handed rank 0's slice of the broadcast batch under dispatch_batches=True: the ranks train on the same samples")
def dispatch_batches_every_rank_gets_rank0_slice(patch):
    from accelerate.data_loader import DataLoaderDispatcher

    def init(original, self, *args, **kwargs):
        original(self, *args, **kwargs)
        slice_fn = self.slice_fn

        def first_slice(data, tensor_slice, **kw):
            return slice_fn(data, slice(0, tensor_slice.stop - tensor_slice.start), **kw)

        self.slice_fn = first_slice

    patch.wrap(DataLoaderDispatcher, "__init__", init)


@mutant("batch-sampler-shard-ignores-drop-last",
        "the prepared loader's BatchSamplerShard ignores the DataLoader's drop_last: it pads the last round "
        "from the start, as without it")
def batch_sampler_shard_ignores_drop_last(patch):
    from accelerate.data_loader import BatchSamplerShard

    def init(original, self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.drop_last = False  # read as if the DataLoader had not set it

    patch.wrap(BatchSamplerShard, "__init__", init)


@mutant("gather-for-metrics-object-path-not-cut",
        "gather_for_metrics cuts the padded duplicates of tensors only: non-tensors come back from gather_object "
        "uncut (Accelerate 0.23-0.29, whose cut was recursively_apply, which leaves non-tensor leaves as they are)")
def gather_for_metrics_object_path_not_cut(patch):
    from accelerate import Accelerator
    from accelerate.utils import gather_object, recursively_apply

    def gather_for_metrics(original, self, input_data, use_gather_object=False):
        try:
            recursively_apply(lambda x: x, input_data, error_on_other_type=True)
        except TypeError:
            return gather_object(input_data)  # what 0.29.3 returned: the cut never touched these leaves
        return original(self, input_data, use_gather_object=use_gather_object)

    patch.wrap(Accelerator, "gather_for_metrics", gather_for_metrics)


@mutant("gather-for-metrics-cuts-with-any-batch-sampler",
        "gather_for_metrics finds the remainder for any batch sampler (from the size of its batches), so the "
        "padding is cut even when the batch sampler has no batch_size")
def gather_for_metrics_cuts_with_any_batch_sampler(patch):
    from accelerate.data_loader import DataLoaderShard

    original = DataLoaderShard.total_batch_size

    def total_batch_size(self):
        sampler = self.batch_sampler
        if getattr(sampler, "batch_size", None) is None and hasattr(sampler, "batch_sampler"):
            patch.ran()
            return len(next(iter(sampler.batch_sampler))) * getattr(sampler, "num_processes", 1)
        return original.fget(self)

    patch.replace(DataLoaderShard, "total_batch_size", property(total_batch_size))


@mutant("join-divides-by-ranks-left-by-default",
        "Under torch's Join, DDP divides a joined step's gradient by the ranks still training unless told "
        "otherwise (divide_by_initial_world_size defaults to False)")
def join_divides_by_ranks_left_by_default(patch):
    from torch.nn.parallel import DistributedDataParallel

    mark = _reached_in_forked_children(patch)

    def join_hook(original, self, **kwargs):
        mark()
        return original(self, **{"divide_by_initial_world_size": False, **kwargs})

    patch.wrap(DistributedDataParallel, "join_hook", join_hook)
