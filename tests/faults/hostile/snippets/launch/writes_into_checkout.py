# Writes beside itself, outside its scratch folder: where the pages and snippets live in the checkout.
import os
from pathlib import Path

import _claims

if os.environ["RANK"] == "0":
    (Path(__file__).parent / "injected_by_snippet.txt").write_text("written by a snippet\n")
_claims.equal("writes_into_checkout", measured=1.0, control=0.0, expected=1.0)
