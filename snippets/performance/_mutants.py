"""Mutants for the performance pages: the library behaving the way the wrong answers say."""

from verify.mutation import mutant


@mutant("prepare-ignores-dynamo-plugin", "prepare() leaves the model uncompiled although a dynamo backend is set")
def prepare_ignores_dynamo_plugin(patch):
    from accelerate import Accelerator
    from accelerate.utils import DynamoBackend

    def uncompiled(original, self, *args, **kwargs):
        plugin = self.state.dynamo_plugin
        backend, plugin.backend = plugin.backend, DynamoBackend.NO
        try:
            return original(self, *args, **kwargs)
        finally:
            plugin.backend = backend

    patch.wrap(Accelerator, "prepare_model", uncompiled)


@mutant("regional-compilation-compiles-whole-model",
        "use_regional_compilation is ignored: prepare() compiles the whole model as one graph")
def regional_compilation_compiles_whole_model(patch):
    import accelerate.accelerator
    import torch

    def whole(original, model, **compile_kwargs):
        return torch.compile(model, **compile_kwargs)

    patch.wrap(accelerate.accelerator, "compile_regions", whole)
