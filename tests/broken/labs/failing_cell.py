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
#     title: A lab whose third cell raises
#     processes: 2
#     timeout: 60
#     claims:
#       never_reported:
#         says: the cell that would report it is never reached
#         control: none
# ---

# %% [markdown]
# # A lab whose third cell raises

# %%
import _claims

# %%
ratio = 1 / 0  # fails on purpose

# %%
_claims.equal("never_reported", measured=1, control=0, expected=1, world=[])
