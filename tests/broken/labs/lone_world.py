# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     notebook_metadata_filter: proof
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
#   proof:
#     title: A lab whose workers each ran alone
#     processes: 2
#     timeout: 60
#     claims:
#       holds_but_alone:
#         says: the claim holds, but its world was one process without a backend
#         control: none
# ---

# %%
import _claims

alone = [{"rank": 0, "world_size": 1, "num_processes": 1, "backend": None, "distributed_type": "NO"}]
_claims.equal("holds_but_alone", measured=1, control=0, expected=1, world=alone)
