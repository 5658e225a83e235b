"""Mutants that misuse the library the way a careless mutant could: one assigns straight to torch's class
(no Patch API, nothing to undo), one changes nothing. In grouped mode each must still start from the
library an isolated run sees: the harmless one survives in both modes."""
from verify.mutation import mutant


@mutant("linear-tripled-by-assignment", "Linear's forward triples its output, assigned without the Patch API")
def linear_tripled_by_assignment(patch):
    import torch

    original = torch.nn.Linear.forward
    torch.nn.Linear.forward = lambda self, x: 3 * original(self, x)
    patch.ran()


@mutant("linear-untouched", "Linear is wrapped and left exactly as it was (a mutant no claim can catch)")
def linear_untouched(patch):
    import torch

    patch.wrap(torch.nn.Linear, "forward", lambda original, *args, **kwargs: original(*args, **kwargs))
